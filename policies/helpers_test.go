package policies

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// t0 is aligned to every window used in tests (a UTC midnight), so bucket
// boundaries fall on whole seconds/minutes from it in both limiters.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is a hand-stepped clock shared by limiters and stores.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newRedisClient connects to the test Redis. Without it the test is
// skipped, unless REQUIRE_REDIS=1 demands that it fail. Reachability is
// probed once per test binary, so a missing Redis costs one dial, not one
// per test.
func newRedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	return redistest.Client(tb, 0)
}

// testPrefix returns a key prefix unique to this test run and deletes
// every key under it when the test ends (and only those keys).
func testPrefix(tb testing.TB, c redis.UniversalClient) string {
	tb.Helper()
	p := "llmgw:test:" + uuid.NewString() + ":"
	tb.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = c.Del(ctx, keys...).Err()
		}
	})
	return p
}

// limiterKind builds a Limiter on a fake clock; the Redis one sends the
// fake time to its scripts instead of using TIME.
type limiterKind struct {
	name string
	make func(t *testing.T, clock *fakeClock) Limiter
}

func limiterKinds() []limiterKind {
	return []limiterKind{
		{"memory", func(t *testing.T, clock *fakeClock) Limiter {
			return NewMemoryLimiter(WithClock(clock.Now))
		}},
		{"redis", func(t *testing.T, clock *fakeClock) Limiter {
			c := newRedisClient(t)
			r := NewRedisLimiter(c, WithKeyPrefix(testPrefix(t, c)))
			r.now = clock.Now
			return r
		}},
	}
}

func strp(s string) *string { return &s }
