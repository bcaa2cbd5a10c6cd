// Package redistest connects tests to the Redis that CI provides at
// 127.0.0.1:6379 (or $REDIS_ADDR). Without it a test is skipped with a
// message, unless REQUIRE_REDIS=1 (set by .ci/run) makes a missing Redis a
// failure, so CI can never pass by skipping.
package redistest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr is the test Redis address.
func Addr() string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

var (
	probe    sync.Once
	probeErr error
)

// Available reports whether Redis answers. It dials once per test
// process, so a missing Redis costs one dial, not one per test.
func Available() error {
	probe.Do(func() {
		c := redis.NewClient(&redis.Options{Addr: Addr(), DialTimeout: time.Second, MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		probeErr = c.Ping(ctx).Err()
	})
	return probeErr
}

// Required reports whether REQUIRE_REDIS=1 demands Redis.
func Required() bool { return os.Getenv("REQUIRE_REDIS") == "1" }

// Require skips tb when Redis is unreachable, or fails it when Redis is
// required.
func Require(tb testing.TB) {
	tb.Helper()
	if err := Available(); err != nil {
		if Required() {
			tb.Fatalf("Redis at %s is unreachable and REQUIRE_REDIS=1: %v", Addr(), err)
		}
		tb.Skipf("skipping: Redis at %s is unreachable (%v); set REQUIRE_REDIS=1 to make this a failure", Addr(), err)
	}
}

// Client requires Redis and returns a client on database db, closed when
// the test ends.
func Client(tb testing.TB, db int) *redis.Client {
	tb.Helper()
	Require(tb)
	c := redis.NewClient(&redis.Options{Addr: Addr(), DB: db, DialTimeout: time.Second, PoolSize: 64})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
