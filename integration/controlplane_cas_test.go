package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestKeysWritesAcrossInstances: the gateway (one instance) and a second
// key store on the same Redis (another instance, as another gateway
// process opens it). (1) A write sent with the ETag the gateway answered
// is refused 412 precondition_failed once the other instance changed the
// record, at once, before the gateway's memory has seen that change, and
// stores nothing; the current tag passes. (2) The same virtual key slug
// created on both instances at the same moment is stored once: the
// gateway answers 200 or 409 slug_taken, the other instance nil or
// ErrConflict, exactly one of each, every round.
func TestKeysWritesAcrossInstances(t *testing.T) {
	ctx := context.Background()
	rc := redistest.Client(t, 0)
	kp := "itest-cas-" + uuid.NewString()[:8] + ":"
	t.Cleanup(func() {
		for it := rc.Scan(ctx, 0, kp+"*", 1000).Iterator(); it.Next(ctx); {
			rc.Del(ctx, it.Val())
		}
	})
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL)+fmt.Sprintf("redis %s {\n\t\t\tkey_prefix %s\n\t\t}\n\t\t", redistest.Addr(), kp))
	s.load(t)

	enc, err := keys.ParseEncryptionKey(keysEncryptionKey)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := keys.NewSealer(enc)
	if err != nil {
		t.Fatal(err)
	}
	opts := keys.Options{KV: kvstore.NewRedis(rc, 0), Redis: rc, Prefix: kp + "llm_gateway/keys", Sealer: sealer}
	kvOpts := opts
	opts.Secret = func(ctx context.Context) ([]byte, error) { return keys.LoadOrCreateSecret(ctx, kvOpts) }
	other, err := keys.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Init(ctx); err != nil {
		t.Fatal(err)
	}

	// (1) If-Match across instances.
	resp, raw := doRetry(t, "POST", "/api-keys/workspace/service", `{"name":"shared","scopes":["completions.write"]}`, "x-gateway-api-key", keysAdminKey)
	var created createdKey
	if resp.StatusCode != 200 || json.Unmarshal(raw, &created) != nil {
		t.Fatalf("create: %d %s", resp.StatusCode, raw)
	}
	tag := resp.Header.Get("ETag")
	if tag != controlplane.ETag(created.ID, 1) {
		t.Fatalf("create ETag %q", tag)
	}
	if _, err := other.UpdateAPIKey(ctx, created.ID, func(r *keys.APIKey) error { r.Description = "other"; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/api-keys/" + created.ID, `{"name":"mine"}`},
		{"POST", "/api-keys/" + created.ID + "/rotate", `{}`},
		{"DELETE", "/api-keys/" + created.ID, ""},
	} {
		resp, raw := doRetry(t, w.method, w.path, w.body, "x-gateway-api-key", keysAdminKey, "If-Match", tag)
		if resp.StatusCode != 412 || errCode(t, raw) != "precondition_failed" || resp.Header.Get("x-gateway-error") != "true" {
			t.Fatalf("%s with a stale If-Match: %d %s", w.method, resp.StatusCode, raw)
		}
	}
	stored, _ := other.APIKey(created.ID)
	if stored == nil || stored.Version != 2 || stored.Name != "shared" || stored.Status != keys.StatusActive {
		t.Fatalf("the refused writes stored something: %+v", stored)
	}
	resp, raw = doRetry(t, "PUT", "/api-keys/"+created.ID, `{"name":"mine"}`, "x-gateway-api-key", keysAdminKey, "If-Match", controlplane.ETag(created.ID, 2))
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != controlplane.ETag(created.ID, 3) {
		t.Fatalf("write at the current version: %d %q %s", resp.StatusCode, resp.Header.Get("ETag"), raw)
	}

	// (2) One slug, two instances, at once.
	for i := range 12 {
		slug := fmt.Sprintf("race-%d", i)
		var wg sync.WaitGroup
		var status int
		var body []byte
		var otherErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			r, b := doRetry(t, "POST", "/virtual-keys", `{"name":"`+slug+`","slug":"`+slug+`","provider":"openai","key":"sk-test-provider-key"}`, "x-gateway-api-key", keysAdminKey)
			status, body = r.StatusCode, b
		}()
		go func() {
			defer wg.Done()
			otherErr = other.CreateVirtualKey(ctx, &keys.VirtualKey{Name: slug, Slug: slug, OrganisationID: keysOrg, WorkspaceID: keysWorkspace},
				providers.Settings{Provider: "openai", APIKey: "sk-test-provider-key"})
		}()
		wg.Wait()
		switch {
		case status == 200 && errors.Is(otherErr, keys.ErrConflict):
		case status == 409 && otherErr == nil:
			if errCode(t, body) != "slug_taken" {
				t.Fatalf("round %d: 409 %s", i, body)
			}
		default:
			t.Fatalf("round %d: the gateway answered %d %s, the other instance %v: want exactly one created", i, status, body, otherErr)
		}
	}
}
