package policies

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Raiser is a Limiter that can raise a key's count to a floor in one
// atomic step. A usage limit (package budgets) carries spend over into a
// counter that starts empty (one rebuilt from its ledger, or one counted
// in a new unit) this way: raising to a floor, unlike adding, is the same
// whether one instance does it or several do at once, so no spend is lost
// and none is counted twice. Both MemoryLimiter and RedisLimiter
// implement it.
type Raiser interface {
	// Raise gives back the expired reservations on key, then, when key
	// counts less than floor in its window (reservations included), adds
	// the difference now. It returns the count after the call.
	Raise(ctx context.Context, key string, limit int64, window time.Duration, floor int64) (int64, error)
}

var (
	_ Raiser = (*MemoryLimiter)(nil)
	_ Raiser = (*RedisLimiter)(nil)
)

// Raise implements Raiser under the key's shard lock.
func (m *MemoryLimiter) Raise(_ context.Context, key string, limit int64, window time.Duration, floor int64) (int64, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return 0, err
	}
	var total int64
	m.update(key, window, floor > 0, func(c *counter, t int64) {
		c.reclaim(t)
		if c.total < floor {
			c.add(floorDiv(t, c.width), floor-c.total)
		}
		total = c.total
	})
	return total, nil
}

// raiseScript returns the key's count after raising it to ARGV[4].
var raiseScript = redis.NewScript(luaPrelude + luaLeases + `
reclaim()
if total < amount then add(amount - total) end
keep(finish())
return total
`)

// Raise implements Raiser in one script over the key's counter and
// reservations, so concurrent raises and reservations on the key are
// atomic against every instance.
func (r *RedisLimiter) Raise(ctx context.Context, key string, limit int64, window time.Duration, floor int64) (int64, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return 0, err
	}
	if floor < 0 {
		floor = 0
	}
	total, err := raiseScript.Run(ctx, r.client, r.leaseKeys(key), r.args(limit, window, floor)...).Int64()
	if err != nil {
		return 0, fmt.Errorf("policies: redis raise: %w", err)
	}
	return total, nil
}
