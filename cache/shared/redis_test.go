package shared

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testPrefix is a prefix no other test or helper uses; its keys are
// deleted when the test ends.
func testPrefix(t *testing.T, c redis.UniversalClient) string {
	p := fmt.Sprintf("test:%s:%x:", t.Name(), rand.Uint64())
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, p+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return p
}

func key(s string) string {
	k, _ := cache.Key(cache.KeyParts{Op: "chat", Body: []byte(`{"q":"` + s + `"}`)})
	return k
}

func TestRedisSharedBetweenInstances(t *testing.T) {
	// Two gateway instances: separate clients, one Redis.
	c1, c2 := redistest.Client(t, 0), redistest.Client(t, 0)
	prefix := testPrefix(t, c1)
	a := NewRedis(c1, RedisOptions{Prefix: prefix})
	b := NewRedis(c2, RedisOptions{Prefix: prefix})
	ctx := context.Background()
	if _, ok := b.Get(ctx, key("q1")); ok {
		t.Fatal("hit before anything was stored")
	}
	if !a.Set(ctx, key("q1"), 200, []byte(`{"id":"1"}`), time.Hour) {
		t.Fatal("Set failed")
	}
	e, ok := b.Get(ctx, key("q1"))
	if !ok || e.Status != 200 || string(e.Body) != `{"id":"1"}` {
		t.Fatalf("instance b got %+v, %v", e, ok)
	}
	if _, ok := b.Get(ctx, key("q2")); ok {
		t.Fatal("another key hit")
	}
	// Another prefix is another cache.
	if _, ok := NewRedis(c2, RedisOptions{Prefix: prefix + "other:"}).Get(ctx, key("q1")); ok {
		t.Fatal("another prefix hit")
	}
	// The key in Redis is the prefix and the hex of the cache key, with
	// the max age as TTL.
	ttl, err := c1.PTTL(ctx, prefix+fmt.Sprintf("%x", key("q1"))).Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("TTL = %v, %v; want about 1h", ttl, err)
	}
}

func TestRedisSetBounds(t *testing.T) {
	c := redistest.Client(t, 0)
	r := NewRedis(c, RedisOptions{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	big := bytes.Repeat([]byte("a"), cache.MaxEntrySize+1)
	max := bytes.Repeat([]byte("a"), cache.MaxEntrySize)
	tests := []struct {
		name   string
		status int
		body   []byte
		maxAge time.Duration
		stored bool
	}{
		{"largest body", 200, max, time.Minute, true},
		{"oversized body", 200, big, time.Minute, false},
		{"empty body", 200, nil, time.Minute, false},
		{"no max age", 200, []byte("x"), 0, false},
		{"bad status", 42, []byte("x"), time.Minute, false},
		{"max age capped", 200, []byte("x"), 1000 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key(tt.name)
			if got := r.Set(ctx, k, tt.status, tt.body, tt.maxAge); got != tt.stored {
				t.Fatalf("Set = %v, want %v", got, tt.stored)
			}
			e, ok := r.Get(ctx, k)
			if ok != tt.stored || (ok && !bytes.Equal(e.Body, tt.body)) {
				t.Fatalf("Get ok = %v, want %v", ok, tt.stored)
			}
		})
	}
	ttl := c.PTTL(ctx, r.redisKey(key("max age capped"))).Val()
	if ttl > cache.MaxMaxAge || ttl < cache.MaxMaxAge-time.Minute {
		t.Fatalf("TTL = %v, want %v", ttl, cache.MaxMaxAge)
	}
}

func TestRedisExpiryAndCorruptValues(t *testing.T) {
	c := redistest.Client(t, 0)
	clk := &clock{t: time.Now()}
	r := NewRedis(c, RedisOptions{Prefix: testPrefix(t, c), Now: clk.Now})
	ctx := context.Background()
	r.Set(ctx, key("a"), 200, []byte("x"), time.Minute)
	if _, ok := r.Get(ctx, key("a")); !ok {
		t.Fatal("miss before expiry")
	}
	clk.Add(time.Minute)
	if _, ok := r.Get(ctx, key("a")); ok {
		t.Fatal("hit at expiry on the injected clock")
	}
	for name, v := range map[string]string{"empty": "", "header only": "\x01\x00\xc8\x00\x00\x00\x00\x00\x00\x00\x00", "other version": "\x02" + string(encode(200, time.Now().Add(time.Hour), []byte("x"))[1:]), "bad status": string(encode(200, time.Now().Add(time.Hour), []byte("x"))[:1]) + "\x00\x01" + string(encode(200, time.Now().Add(time.Hour), []byte("x"))[3:])} {
		c.Set(ctx, r.redisKey(key(name)), v, time.Minute)
		if _, ok := r.Get(ctx, key(name)); ok {
			t.Errorf("%s value: hit", name)
		}
	}
}

func TestRedisDownIsAMiss(t *testing.T) {
	// Nothing listens on port 1: every command fails at once.
	var calls atomic.Int64
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	c.AddHook(countHook{&calls})
	core, logs := observer.New(zap.WarnLevel)
	clk := &clock{t: time.Now()}
	r := NewRedis(c, RedisOptions{Logger: zap.New(core), Now: clk.Now, Backoff: time.Second, LogInterval: time.Minute})
	ctx := context.Background()
	if _, ok := r.Get(ctx, key("a")); ok {
		t.Fatal("hit with Redis down")
	}
	if calls.Load() != 1 {
		t.Fatalf("calls = %d, want 1", calls.Load())
	}
	// Within the backoff Redis is not asked again.
	if r.Set(ctx, key("a"), 200, []byte("x"), time.Minute) {
		t.Fatal("Set reported success with Redis down")
	}
	if _, ok := r.Get(ctx, key("a")); ok || calls.Load() != 1 {
		t.Fatalf("Redis asked during the backoff: calls = %d", calls.Load())
	}
	// After it, Redis is tried again; the new error is not logged again
	// within the log interval.
	clk.Add(2 * time.Second)
	r.Get(ctx, key("a"))
	if calls.Load() != 2 {
		t.Fatalf("calls = %d after the backoff, want 2", calls.Load())
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d log entries, want 1", n)
	}
	clk.Add(time.Minute)
	r.Get(ctx, key("a"))
	all := logs.All()
	if len(all) != 2 || all[1].ContextMap()["errors_not_logged"] != int64(1) {
		t.Fatalf("log entries = %+v; want a second one counting 1 error not logged", all)
	}
}

type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestLocalBackend(t *testing.T) {
	s, err := cache.New(1<<20, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b Backend = Local{Store: s}
	ctx := context.Background()
	if !b.Set(ctx, key("a"), 201, []byte("x"), time.Minute) {
		t.Fatal("Set failed")
	}
	if e, ok := b.Get(ctx, key("a")); !ok || e.Status != 201 || string(e.Body) != "x" {
		t.Fatalf("Get = %+v, %v", e, ok)
	}
	if _, ok := b.Get(ctx, key("b")); ok {
		t.Fatal("hit on another key")
	}
}

// BenchmarkRedisGet is the cost of an exact lookup in Redis (1 KB answer).
func BenchmarkRedisGet(b *testing.B) {
	c := redistest.Client(b, 0)
	prefix := fmt.Sprintf("bench:%x:", rand.Uint64())
	r := NewRedis(c, RedisOptions{Prefix: prefix})
	ctx := context.Background()
	r.Set(ctx, key("hit"), 200, bytes.Repeat([]byte("a"), 1024), time.Minute)
	b.Cleanup(func() { c.Del(ctx, r.redisKey(key("hit"))) })
	for _, kind := range []string{"hit", "miss"} {
		b.Run(kind, func(b *testing.B) {
			k := key(kind)
			for b.Loop() {
				if _, ok := r.Get(ctx, k); ok != (kind == "hit") {
					b.Fatalf("hit = %v", ok)
				}
			}
		})
	}
}
