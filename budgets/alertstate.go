package budgets

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Once reports whether this is the first call for key within ttl, across
// every instance that shares it.
type Once interface {
	First(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// Markers is a Once whose marks can be looked at without being set: a
// counter's seed marker (seed.go) is looked at first and set only once
// the counter was seeded, so no instance takes a marker for a seed still
// under way.
type Markers interface {
	Once
	// Marked reports whether a First call for key is within its ttl.
	Marked(ctx context.Context, key string) (bool, error)
}

// RedisOnce is Once over a shared Redis (SET NX with an expiry). Its keys
// are Prefix (the llm app's key_prefix) + "llm:budget-once:" + key, so a
// prefixed deployment keeps every key under its prefix.
type RedisOnce struct {
	Client redis.UniversalClient
	Prefix string
}

// First implements Once.
func (o RedisOnce) First(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return o.Client.SetNX(ctx, o.key(key), 1, ttl).Result()
}

// Marked implements Markers.
func (o RedisOnce) Marked(ctx context.Context, key string) (bool, error) {
	n, err := o.Client.Exists(ctx, o.key(key)).Result()
	return n > 0, err
}

// key is the Redis key of key's mark.
func (o RedisOnce) key(key string) string { return o.Prefix + "llm:budget-once:" + key }

// MemoryOnce is Once within one process.
type MemoryOnce struct {
	mu   sync.Mutex
	seen map[string]time.Time
	now  func() time.Time
}

// NewMemoryOnce returns a MemoryOnce telling time with now (nil: time.Now).
func NewMemoryOnce(now func() time.Time) *MemoryOnce {
	if now == nil {
		now = time.Now
	}
	return &MemoryOnce{seen: make(map[string]time.Time), now: now}
}

// First implements Once. Expired keys are dropped as new ones arrive.
func (o *MemoryOnce) First(_ context.Context, key string, ttl time.Duration) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if until, ok := o.seen[key]; ok && now.Before(until) {
		return false, nil
	}
	for k, until := range o.seen {
		if !now.Before(until) {
			delete(o.seen, k)
		}
	}
	o.seen[key] = now.Add(ttl)
	return true, nil
}

// Marked implements Markers.
func (o *MemoryOnce) Marked(_ context.Context, key string) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	until, ok := o.seen[key]
	return ok && o.now().Before(until), nil
}

// MaxAlerted bounds how many groups' alerted periods are remembered for
// their reset event at once; a group beyond it alerts but gets no reset
// (logged and counted).
const MaxAlerted = 100_000

// ErrTooManyMarks is Marks.Add's refusal beyond MaxAlerted marks.
var ErrTooManyMarks = errors.New("budgets: too many alerted groups remembered for their reset")

// AlertMark remembers that a group alerted in a period, so that a reset
// event can be sent when the period ends: the alert's limit, group and
// period, and what computing the next period needs.
type AlertMark struct {
	// Key is the counter key of the group's period, without its unit
	// (unitless of Grant.Key).
	Key string `json:"key"`
	// Alert is the last alert sent (its event and used are replaced).
	Alert Alert `json:"alert"`
	// Reset and Timezone are the limit's periodic_reset and timezone.
	Reset    string `json:"reset"`
	Timezone string `json:"timezone,omitempty"`
	// End is the period's end, when the reset is due.
	End time.Time `json:"end"`
}

// Marks holds the AlertMarks of every instance sharing it: any instance
// may send the reset of a period another instance alerted in.
type Marks interface {
	// Add remembers m until it is removed; adding a mark twice keeps one.
	// It refuses (ErrTooManyMarks) beyond MaxAlerted marks.
	Add(ctx context.Context, m AlertMark) error
	// Due returns up to n marks whose period ended at or before now.
	Due(ctx context.Context, now time.Time, n int) ([]AlertMark, error)
	// Remove forgets m.
	Remove(ctx context.Context, m AlertMark) error
}

// RedisMarks is Marks in a sorted set of a shared Redis, scored by the
// period's end: Prefix + "llm:budget-alerted".
type RedisMarks struct {
	Client redis.UniversalClient
	Prefix string
}

func (r RedisMarks) key() string { return r.Prefix + "llm:budget-alerted" }

// Add implements Marks. A mark is its JSON encoding, so the same group
// and period alerting twice (threshold, then exhausted) is one member.
func (r RedisMarks) Add(ctx context.Context, m AlertMark) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	n, err := r.Client.ZCard(ctx, r.key()).Result()
	if err != nil {
		return err
	}
	if n >= MaxAlerted {
		return ErrTooManyMarks
	}
	return r.Client.ZAdd(ctx, r.key(), redis.Z{Score: float64(m.End.Unix()), Member: string(b)}).Err()
}

// Due implements Marks.
func (r RedisMarks) Due(ctx context.Context, now time.Time, n int) ([]AlertMark, error) {
	vals, err := r.Client.ZRangeByScore(ctx, r.key(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.Unix(), 10), Count: int64(n)}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]AlertMark, 0, len(vals))
	for _, v := range vals {
		var m AlertMark
		if json.Unmarshal([]byte(v), &m) != nil {
			// Not this version's: drop it rather than read it again.
			_ = r.Client.ZRem(ctx, r.key(), v).Err()
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// Remove implements Marks.
func (r RedisMarks) Remove(ctx context.Context, m AlertMark) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return r.Client.ZRem(ctx, r.key(), string(b)).Err()
}

// MemoryMarks is Marks within one process.
type MemoryMarks struct {
	mu    sync.Mutex
	marks map[string]AlertMark
}

// NewMemoryMarks returns an empty MemoryMarks.
func NewMemoryMarks() *MemoryMarks { return &MemoryMarks{marks: make(map[string]AlertMark)} }

func markID(m AlertMark) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// Add implements Marks.
func (s *MemoryMarks) Add(_ context.Context, m AlertMark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := markID(m)
	if _, ok := s.marks[id]; !ok && len(s.marks) >= MaxAlerted {
		return ErrTooManyMarks
	}
	s.marks[id] = m
	return nil
}

// Due implements Marks.
func (s *MemoryMarks) Due(_ context.Context, now time.Time, n int) ([]AlertMark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AlertMark
	for _, m := range s.marks {
		if len(out) == n {
			break
		}
		if !m.End.After(now) {
			out = append(out, m)
		}
	}
	return out, nil
}

// Remove implements Marks.
func (s *MemoryMarks) Remove(_ context.Context, m AlertMark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.marks, markID(m))
	return nil
}
