package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// sharedCacheDB is the only Redis database these tests use.
const sharedCacheDB = 11

// TestSharedCacheAcrossInstances: with `llm { redis … }` the simple cache
// lives in Redis, so a gateway that never saw a request serves the answer
// another stored. The harness runs one Caddy per process, so the two
// instances are two configurations loaded in turn, each with a cache size
// of its own: the second starts with an empty in-process cache (the
// first's is closed when its config is unloaded), and only Redis holds
// the answer.
func TestSharedCacheAcrossInstances(t *testing.T) {
	rdb := redistest.Client(t, sharedCacheDB)
	up := newEchoChat(t)
	redisLLM := fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}", redistest.Addr(), sharedCacheDB)
	instance := func(size string, redis bool) site {
		s := site{Gateway: "custom_host_allow loopback\ncache_size " + size}
		if redis {
			s.LLM = redisLLM
		}
		return s
	}
	cfg := target(up.fakeOpenAI, `"cache":{"mode":"simple","max_age":120}`)
	// A question of this run only: Redis outlives test processes.
	question := "shared " + uuid.NewString()
	ask := func() (string, string) {
		t.Helper()
		resp, raw := do(t, "POST", "/chat/completions", askBody("gpt-4o-mini", question), "x-gateway-config", compactJSON(t, cfg))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		return resp.Header.Get("x-gateway-cache-status"), answerOf(t, raw)
	}
	first := "re: " + question + " [1]"

	loadFresh(t, instance("22MB", true))
	if s, a := ask(); s != "MISS" || a != first {
		t.Fatalf("instance A, first request: %s %q", s, a)
	}
	key := storedKey(t, rdb, question)
	if ttl := rdb.TTL(context.Background(), key).Val(); ttl <= 0 || ttl > 120*time.Second {
		t.Fatalf("the answer's TTL in Redis is %v, want max_age (120s) at most", ttl)
	}

	loadFresh(t, instance("23MB", true))
	if s, a := ask(); s != "HIT" || a != first || up.count() != 1 {
		t.Fatalf("instance B: %s %q after %d provider calls, want A's answer from Redis", s, a, up.count())
	}

	// Without Redis, a fresh instance has nothing: the hit came from Redis.
	loadFresh(t, instance("24MB", false))
	if s, _ := ask(); s != "MISS" || up.count() != 2 {
		t.Fatalf("instance without redis: %s after %d provider calls", s, up.count())
	}

	// And removing the answer from Redis makes a Redis instance miss.
	loadFresh(t, instance("25MB", true))
	if err := rdb.Del(context.Background(), key).Err(); err != nil {
		t.Fatal(err)
	}
	if s, a := ask(); s != "MISS" || a != "re: "+question+" [3]" {
		t.Fatalf("after the Redis entry went: %s %q", s, a)
	}
}

// storedKey returns the Redis key of the shared cache's answer naming
// question, failing when there is none.
func storedKey(t testing.TB, rdb *redis.Client, question string) string {
	t.Helper()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "llm:cache:*", 100).Iterator()
	for iter.Next(ctx) {
		if v, err := rdb.Get(ctx, iter.Val()).Bytes(); err == nil && strings.Contains(string(v), question) {
			return iter.Val()
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatal("no answer in Redis under llm:cache:*")
	return ""
}
