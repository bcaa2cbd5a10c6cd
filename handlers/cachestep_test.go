package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/semantic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/shared"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// localCache is a response cache in store, without a semantic index.
func localCache(store *cache.Store) *responseCache {
	return &responseCache{Cache: &semantic.Cache{Store: shared.Local{Store: store}}}
}

func cacheRequest(stream bool, leaves ...*routing.Target) *Request {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	return &Request{
		Header:   &ingress.Headers{},
		Identity: &identity.Caller{WorkspaceID: "w"},
		Call:     providers.Call{Op: providers.OpChat, Method: "POST", Path: "/chat/completions", Body: []byte(body), Model: "m", Stream: stream},
		Plan:     &routing.Plan{Leaves: leaves},
	}
}

// TestCacheStep: without a caching target the executor runs bare (no
// cost); with one, a stored answer is served as JSON or as a synthesized
// stream, labelled HIT, and a stored answer is what the sink stores.
func TestCacheStep(t *testing.T) {
	store, err := cache.New(1<<20, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	plain := testTarget()
	if bare := planSteps(t, cacheRequest(false, plain), localCache(store), nil); bare != any(bare.(*executor)) {
		t.Fatal("no caching target: the sender must run bare")
	}
	cached := testTarget()
	cached.Cache = &routing.Cache{Mode: "simple"}
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m-2024","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	for _, stream := range []bool{false, true} {
		// A fresh store each time: streamed and plain requests share keys.
		store, _ := cache.New(1<<20, time.Now)
		defer store.Close()
		q := cacheRequest(stream, cached)
		rc := localCache(store)
		step, ok := planSteps(t, q, rc, nil).(*cacheStep)
		if !ok {
			t.Fatal("a caching target must get the cache step")
		}
		if _, hit := step.cached(context.Background(), q.attemptFor(cached)); hit {
			t.Fatal("hit on an empty cache")
		}
		sink := &storeSink{rc: rc, ct: q.attemptFor(cached).cache, ctx: context.Background()}
		sink.Done(200, []byte(answer), false)
		o, hit := step.cached(context.Background(), q.attemptFor(cached))
		res := resultOf(o)
		if !hit || res == nil || res.label != cache.StatusHit || res.held == nil || o.Committed {
			t.Fatalf("stream=%v: hit=%v %+v", stream, hit, res)
		}
		if stream != strings.Contains(string(res.held.body), "data: [DONE]") || res.held.stream != stream {
			t.Fatalf("stream=%v: body %s", stream, res.held.body)
		}
		if !stream && res.model != "m-2024" {
			t.Fatalf("model %q", res.model)
		}
	}
}
