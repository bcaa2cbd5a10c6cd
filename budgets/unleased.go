package budgets

import (
	"context"
	"sync"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// unleased gives a Limiter that has no leases (not one of package
// policies') the LeaseLimiter methods the enforcer calls. Reservations
// are remembered in process and never expire: nothing in flight is seen
// across instances and nothing a dead instance held comes back.
type unleased struct {
	policies.Limiter
	held *sync.Map // id -> int64
}

func newUnleased(l policies.Limiter) unleased { return unleased{Limiter: l, held: &sync.Map{}} }

// Reserve admits cost, or the remainder of the limit when cost does not
// fit, as policies' limiters do.
func (u unleased) Reserve(ctx context.Context, key string, limit int64, window time.Duration, cost int64, id string, _ time.Duration) (policies.Reservation, error) {
	d, err := u.Admit(ctx, key, limit, window, cost)
	got := cost
	if err == nil && !d.Allowed && cost > 0 && d.Remaining > 0 {
		got = d.Remaining
		d, err = u.Admit(ctx, key, limit, window, got)
	}
	if err != nil || !d.Allowed {
		return policies.Reservation{Decision: d}, err
	}
	if got > 0 && id != "" {
		u.held.Store(id, got)
	}
	return policies.Reservation{Decision: d, Reserved: got}, nil
}

// Settle charges used in place of id's reservation.
func (u unleased) Settle(ctx context.Context, key string, limit int64, window time.Duration, id string, _, used int64, refundable bool) (bool, error) {
	delta := used
	v, live := u.held.LoadAndDelete(id)
	if live {
		delta = used - v.(int64)
		if delta < 0 && !refundable {
			delta = 0
		}
	}
	return live, u.Adjust(ctx, key, limit, window, delta)
}
