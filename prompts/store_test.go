package prompts

import (
	"context"
	"sync"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// storeKinds are the stores two "instances" (registries) can share.
func storeKinds(t *testing.T) map[string]func() Store {
	dir := t.TempDir()
	kinds := map[string]func() Store{
		"memory": func() func() Store { s := NewMemoryStore(); return func() Store { return s } }(),
		"storage": func() Store {
			return NewStorageStore(&certmagic.FileStorage{Path: dir}, "")
		},
	}
	if c := testRedis(t); c != nil {
		key := "llmgw:test:prompts:" + uuid.NewString()
		t.Cleanup(func() { c.Del(context.Background(), key) })
		kinds["redis"] = func() Store { return NewRedisStore(c, key) }
	}
	return kinds
}

// testRedis returns a client for REDIS_ADDR (default 127.0.0.1:6379), or
// nil when it is unreachable and REQUIRE_REDIS is not 1.
func testRedis(t *testing.T) *redis.Client {
	if err := redistest.Available(); err != nil && !redistest.Required() {
		t.Logf("no Redis at %s: the redis store is not tested", redistest.Addr())
		return nil
	}
	return redistest.Client(t, 0)
}

// TestConcurrentVersionsFromTwoInstances adds versions to one prompt from
// two registries at once: every version number is used exactly once.
func TestConcurrentVersionsFromTwoInstances(t *testing.T) {
	for name, open := range storeKinds(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, _ := NewRegistry(nil, Options{Store: open()})
			b, _ := NewRegistry(nil, Options{Store: open()})
			p, err := a.Create(ctx, wsA, NewPrompt{Name: "Busy", Version: newVersion("v")})
			if err != nil {
				t.Fatal(err)
			}
			each := 8
			if name == "storage" {
				each = 2 // certmagic's file lock polls once a second under contention
			}
			var wg sync.WaitGroup
			for _, reg := range []*Registry{a, b} {
				for i := 0; i < each; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _, err := reg.Update(ctx, wsA, p.ID, Update{NewVersion: func(latest Version) (*Version, error) { return &latest, nil }})
						if err != nil {
							t.Error(err)
						}
					}()
				}
			}
			wg.Wait()
			all, err := open().Load(ctx)
			if err != nil || len(all) != 1 {
				t.Fatalf("load: %d records, %v", len(all), err)
			}
			seen := map[string]bool{}
			for i, v := range all[0].Versions {
				if v.Number != i+1 || seen[v.ID] {
					t.Fatalf("version %d: number %d id %s", i, v.Number, v.ID)
				}
				seen[v.ID] = true
			}
			if n := len(all[0].Versions); n != 1+2*each {
				t.Fatalf("%d versions, want %d", n, 1+2*each)
			}
			// Creating the same name from both instances gives two slugs.
			if _, err := b.Create(ctx, wsA, NewPrompt{Name: "Busy", Version: newVersion("v")}); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Lookup(ctx, wsA, "busy-2"); err != nil {
				t.Fatalf("the other instance's prompt: %v", err)
			}
		})
	}
}
