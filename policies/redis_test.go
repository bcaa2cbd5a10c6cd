package policies

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisConcurrentAdmitsExactlyLimit(t *testing.T) {
	c := newRedisClient(t)
	r := NewRedisLimiter(c, WithKeyPrefix(testPrefix(t, c)))
	for _, key := range []string{"a", "b", "c"} {
		if got := admitConcurrently(t, []Limiter{r}, 200, key, 50); got != 50 {
			t.Fatalf("key %s: admitted %d of 200, want exactly 50", key, got)
		}
	}
}

// TestRedisTwoInstancesShareTheLimit plays two gateway instances, each with
// its own connection pool, enforcing one limit together.
func TestRedisTwoInstancesShareTheLimit(t *testing.T) {
	c1 := newRedisClient(t)
	c2 := newRedisClient(t)
	prefix := testPrefix(t, c1)
	r1 := NewRedisLimiter(c1, WithKeyPrefix(prefix))
	r2 := NewRedisLimiter(c2, WithKeyPrefix(prefix))
	if got := admitConcurrently(t, []Limiter{r1, r2}, 200, "shared", 50); got != 50 {
		t.Fatalf("two instances admitted %d of 200 in total, want exactly 50", got)
	}
	d, err := r2.Admit(context.Background(), "shared", 50, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Remaining != 0 {
		t.Fatalf("probe after the limit was reached: %+v", d)
	}
}

// TestRedisServerTime uses the real Redis clock: a short window refuses,
// then admits again once RetryAfter has passed, and the key expires by
// itself once its units have left the window.
func TestRedisServerTime(t *testing.T) {
	c := newRedisClient(t)
	prefix := testPrefix(t, c)
	r := NewRedisLimiter(c, WithKeyPrefix(prefix))
	ctx := context.Background()
	window := 300 * time.Millisecond
	d, err := r.Admit(ctx, "t", 3, window, 3)
	if err != nil || !d.Allowed {
		t.Fatalf("first admit: %+v, %v", d, err)
	}
	if d.ResetAfter <= window-10*time.Millisecond || d.ResetAfter > window+window/DefaultBuckets {
		t.Fatalf("ResetAfter %v, want about %v", d.ResetAfter, window)
	}
	pttl, err := c.PTTL(ctx, prefix+"t").Result()
	if err != nil || pttl <= 0 || pttl > window+window/DefaultBuckets+time.Millisecond {
		t.Fatalf("PTTL = %v, %v; want a TTL of about the window", pttl, err)
	}
	d, err = r.Admit(ctx, "t", 3, window, 1)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > window+window/DefaultBuckets {
		t.Fatalf("second admit: %+v, %v", d, err)
	}
	time.Sleep(d.RetryAfter + 20*time.Millisecond)
	d, err = r.Admit(ctx, "t", 3, window, 1)
	if err != nil || !d.Allowed {
		t.Fatalf("admit after RetryAfter: %+v, %v", d, err)
	}
	time.Sleep(d.ResetAfter + 50*time.Millisecond)
	if n, err := c.Exists(ctx, prefix+"t").Result(); err != nil || n != 0 {
		t.Fatalf("idle key still in Redis (exists=%d, %v)", n, err)
	}
}

func TestRedisStateLayout(t *testing.T) {
	c := newRedisClient(t)
	prefix := testPrefix(t, c)
	clock := newFakeClock()
	r := NewRedisLimiter(c, WithKeyPrefix(prefix))
	r.now = clock.Now
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		clock.Advance(700 * time.Millisecond)
		if _, err := r.Admit(ctx, "k", 1000, time.Minute, 1); err != nil {
			t.Fatal(err)
		}
	}
	fields, err := c.HGetAll(ctx, prefix+"k").Result()
	if err != nil {
		t.Fatal(err)
	}
	// 70s of traffic in a 60s window: only the live buckets are kept.
	if len(fields) > DefaultBuckets+3 || fields["w"] != "1000000" {
		t.Fatalf("hash has %d fields, w=%q", len(fields), fields["w"])
	}
	for f := range fields {
		if f != "w" && strings.ContainsAny(f, ".eE") {
			t.Fatalf("bucket field %q is not an integer", f)
		}
	}
	// Refunding everything deletes the key.
	if err := r.Adjust(ctx, "k", 1000, time.Minute, -1000); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, prefix+"k").Result(); n != 0 {
		t.Fatal("key kept after a full refund")
	}
}

func TestRedisUnreachableReturnsError(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	r := NewRedisLimiter(c)
	ctx := context.Background()
	if _, err := r.Admit(ctx, "k", 1, time.Minute, 1); err == nil {
		t.Fatal("Admit against an unreachable Redis returned no error")
	}
	if err := r.Adjust(ctx, "k", 1, time.Minute, 1); err == nil {
		t.Fatal("Adjust against an unreachable Redis returned no error")
	}
}
