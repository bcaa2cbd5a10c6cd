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

// TestSemanticCacheOnRedis: with redis configured the semantic cache's
// answers live in Redis too; a semantic hit is re-stored there under the
// paraphrase's own key, so every instance serves it as an exact hit.
func TestSemanticCacheOnRedis(t *testing.T) {
	rdb := redistest.Client(t, sharedCacheDB)
	run := uuid.NewString() // Redis outlives test processes
	first, para := "semantic "+run, "paraphrase "+run
	emb := newFakeEmbeddings(t, map[string][]float32{"user: " + first: axis(0), "user: " + para: near(0.97, 1)})
	up := newEchoChat(t)
	redisLLM := fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}\n\t\t", redistest.Addr(), sharedCacheDB)
	cfg := compactJSON(t, target(up.fakeOpenAI, `"cache":{"mode":"semantic","max_age":120}`))
	ask := func(q, want string) {
		t.Helper()
		resp, raw := do(t, "POST", "/chat/completions", askBody("gpt-4o-mini", q), "x-gateway-config", cfg)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		wantHeaders(t, resp, "x-gateway-cache-status", want)
		if got := answerOf(t, raw); got != "re: "+first+" [1]" {
			t.Fatalf("%s: answer %q", q, got)
		}
	}
	loadFresh(t, site{LLM: redisLLM + semanticLLM(emb, "max_entries 101"), Gateway: "custom_host_allow loopback\ncache_size 26MB"})
	ask(first, "SEMANTIC MISS")
	ask(para, "SEMANTIC HIT")
	storedKey(t, rdb, first)
	// Another instance, with a fresh in-process cache and index.
	loadFresh(t, site{LLM: redisLLM + semanticLLM(emb, "max_entries 102"), Gateway: "custom_host_allow loopback\ncache_size 27MB"})
	ask(para, "HIT")
	ask(first, "HIT")
	if up.count() != 1 || emb.calls() != 2 {
		t.Fatalf("%d provider calls, %d embedding calls", up.count(), emb.calls())
	}
}
