package policies

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

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

func redisAddr() string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

var (
	redisProbe    sync.Once
	redisProbeErr error
)

// newRedisClient connects to the test Redis. Without it the test is
// skipped, unless REQUIRE_REDIS=1 demands that it fail. Reachability is
// probed once per test binary, so a missing Redis costs one dial, not one
// per test.
func newRedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	redisProbe.Do(func() {
		c := redis.NewClient(&redis.Options{Addr: redisAddr(), DialTimeout: time.Second, MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		redisProbeErr = c.Ping(ctx).Err()
	})
	if redisProbeErr != nil {
		if os.Getenv("REQUIRE_REDIS") == "1" {
			tb.Fatalf("Redis at %s is unreachable and REQUIRE_REDIS=1: %v", redisAddr(), redisProbeErr)
		}
		tb.Skipf("skipping: Redis at %s is unreachable (%v); set REQUIRE_REDIS=1 to make this a failure", redisAddr(), redisProbeErr)
	}
	c := redis.NewClient(&redis.Options{Addr: redisAddr(), DialTimeout: time.Second, PoolSize: 64})
	tb.Cleanup(func() { _ = c.Close() })
	return c
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
