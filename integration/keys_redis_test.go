package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// TestKeysRedisInstances: with redis in the llm block the records live in
// Redis, and a revocation made by another instance on the same Redis (a
// second store, as another gateway process runs it) is refused by this
// gateway within the propagation bound; the test logs how long it took.
func TestKeysRedisInstances(t *testing.T) {
	const db = 12
	rc := redistest.Client(t, db)
	rc.FlushDB(context.Background())
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL)+fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}\n\t\t", redistest.Addr(), db))
	s.load(t)
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"shared","scopes":["completions.write"],"defaults":{"virtual_key":"openai"}}`, 200, &created)
	chat := func(want int) []byte {
		t.Helper()
		return call(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, want, nil, "x-gateway-api-key", "", "Authorization", "Bearer "+created.Key)
	}
	chat(200)

	// The other instance: its own store over the same Redis.
	opts := keys.Options{KV: kvstore.NewRedis(rc, 0), Redis: rc}
	kvOpts := opts
	opts.Secret = func(ctx context.Context) ([]byte, error) { return keys.LoadOrCreateSecret(ctx, kvOpts) }
	other, err := keys.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, res := other.Lookup(created.Key); res != keys.Valid {
		t.Fatalf("the other instance does not know the key: %v", res)
	}
	start := time.Now()
	if _, err := other.UpdateAPIKey(context.Background(), created.ID, func(r *keys.APIKey) error { r.Status = keys.StatusRevoked; return nil }); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		resp, raw := doRetry(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, "x-gateway-api-key", created.Key)
		if resp.StatusCode == 401 {
			if errCode(t, raw) != "api_key_revoked" {
				t.Fatalf("revoked: %s", raw)
			}
			break
		}
		if i == 1000 {
			t.Fatal("the gateway never saw the revocation")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("revocation made on another instance refused here after %v", time.Since(start))
	// A dump of Redis holds no key.
	ctx := context.Background()
	n := 0
	for it := rc.Scan(ctx, 0, "*", 1000).Iterator(); it.Next(ctx); n++ {
		if v, err := rc.Get(ctx, it.Val()).Result(); err == nil && strings.Contains(v, created.Key) {
			t.Fatalf("Redis key %s holds the gateway key", it.Val())
		}
	}
	if n == 0 {
		t.Fatal("nothing was stored in Redis")
	}
}
