package keys

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestReplayBoxNeedsServerSecret: the stored replay box of a rotation
// opens with the server secret and the Idempotency-Key, and not with the
// record id and the Idempotency-Key alone (what the box was sealed under
// before) nor under another server secret.
func TestReplayBoxNeedsServerSecret(t *testing.T) {
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	k, _ := s.CreateAPIKey(ctx, &APIKey{Name: "a"})
	_, r, _ := s.Lookup(k)
	const idem = "idem-known-to-the-reader"
	newKey, _, _, err := s.RotateAPIKey(ctx, r.ID, idem, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stored := new(APIKey)
	if _, err := s.loadRecord(ctx, kindAPIKeys, r.ID, stored); err != nil {
		t.Fatal(err)
	}
	box := stored.Rotation.Box
	if got, ok := openReplay(s.Hasher(), idem, r.ID, box); !ok || got != newKey {
		t.Fatal("the box does not open with the server secret")
	}
	// The reader of the store knows the id and the Idempotency-Key.
	sum := sha256.Sum256([]byte("llm-gateway rotate replay\x00" + r.ID + "\x00" + idem))
	block, _ := aes.NewCipher(sum[:])
	g, _ := cipher.NewGCM(block)
	if plain, err := g.Open(nil, box[:g.NonceSize()], box[g.NonceSize():], nil); err == nil {
		t.Fatalf("the box opens without the server secret: %q", plain)
	}
	other, _ := NewHasher([]byte(strings.Repeat("z", 32)))
	if _, ok := openReplay(other, idem, r.ID, box); ok {
		t.Fatal("the box opens under another server secret")
	}
}

// TestRotateReplayWithOtherParameters: the same Idempotency-Key with the
// same grace replays; with another grace it is refused and rotates
// nothing.
func TestRotateReplayWithOtherParameters(t *testing.T) {
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	k, _ := s.CreateAPIKey(ctx, &APIKey{Name: "a"})
	_, r, _ := s.Lookup(k)
	k1, _, _, err := s.RotateAPIKey(ctx, r.ID, "i", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		grace   time.Duration
		wantErr error
	}{
		{"same parameters", time.Hour, nil},
		{"another grace", time.Minute, ErrIdempotencyMismatch},
		{"no grace", 0, ErrIdempotencyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rec, replayed, err := s.RotateAPIKey(ctx, r.ID, "i", tt.grace)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (!replayed || got != k1 || rec.Version != 2) {
				t.Fatalf("not a replay: %v same key %v", replayed, got == k1)
			}
			if cur, _ := s.APIKey(r.ID); cur.Version != 2 {
				t.Fatalf("the key was written again (version %d)", cur.Version)
			}
		})
	}
}

// TestRotateVirtualKeyIdempotent: a virtual key rotation retried with the
// same Idempotency-Key and key changes nothing; with another key it is
// refused.
func TestRotateVirtualKeyIdempotent(t *testing.T) {
	kv, dir := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	vk := &VirtualKey{Slug: "v", WorkspaceID: "ws"}
	if err := s.CreateVirtualKey(ctx, vk, providers.Settings{Provider: "openai", APIKey: "sk-old-provider-key-1"}); err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := s.RotateVirtualKey(ctx, vk.ID, "i", "sk-new-provider-key-2"); err != nil || replayed {
		t.Fatal(err, replayed)
	}
	if r, replayed, err := s.RotateVirtualKey(ctx, vk.ID, "i", "sk-new-provider-key-2"); err != nil || !replayed || r.Version != 2 {
		t.Fatalf("retry: %v replayed %v", err, replayed)
	}
	if _, _, err := s.RotateVirtualKey(ctx, vk.ID, "i", "sk-other-provider-key-3"); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Fatalf("another key under the same Idempotency-Key: %v", err)
	}
	if st, _ := s.VirtualKey("ws", "v"); st.APIKey != "sk-new-provider-key-2" {
		t.Fatalf("serving %q", st.APIKey)
	}
	assertNoSecret(t, dir, "sk-old-provider-key-1", "sk-new-provider-key-2")
}

// TestConfigCredentialsSealed: a saved config's provider key and webhook
// headers are stored sealed (no stored file holds them), listed masked,
// and opened for routing only; without the encryption key such a config
// is refused, and one stored sealed is not served.
func TestConfigCredentialsSealed(t *testing.T) {
	kv, dir := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	const body = `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"sk-config-secret-1"},` +
		`{"provider":"anthropic","api\u005fkey":"sk-config-secret-2"}],` +
		`"before_request_hooks":[{"type":"guardrail","checks":[{"id":"default.webhook","parameters":{"webhookURL":"https://h.example/x","headers":{"Authorization":"Bearer hook-secret-3"}}}]}]}`
	c := &Config{Slug: "c", WorkspaceID: "ws"}
	if err := s.CreateConfig(ctx, c, json.RawMessage(body)); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"sk-config-secret-1", "sk-config-secret-2", "hook-secret-3"}
	if _, err := s.UpdateConfig(ctx, c.ID, json.RawMessage(strings.Replace(body, "secret-1", "secret-4", 1)), func(*Config) error { return nil }); err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, dir, append(secrets, "sk-config-secret-4")...)
	routed, ok := s.Config("ws", "c")
	if !ok || !strings.Contains(string(routed.Latest().Config), "sk-config-secret-4") || !strings.Contains(string(routed.Latest().Config), "hook-secret-3") {
		t.Fatalf("routing does not get the credentials: %v %s", ok, routed.Latest().Config)
	}
	rec, _ := s.ConfigRecord("ws", "c")
	for _, v := range rec.Versions {
		for _, sec := range append(secrets, "sk-config-secret-4") {
			if strings.Contains(string(v.Config), sec) {
				t.Fatalf("the record's version %s shows %s: %s", v.VersionID, sec, v.Config)
			}
		}
		if !strings.Contains(string(v.Config), Masked) || !strings.Contains(string(v.Config), "https://h.example/x") {
			t.Fatalf("the record's version is not the masked body: %s", v.Config)
		}
	}

	// Another instance without the encryption key: not served, not stored.
	h, _ := NewHasher(testSecret)
	s2, _ := New(Options{KV: kv, Hasher: h})
	if err := s2.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Config("ws", "c"); ok {
		t.Fatal("a sealed config is served without the encryption key")
	}
	if err := s2.CreateConfig(ctx, &Config{Slug: "d", WorkspaceID: "ws"}, json.RawMessage(body)); !errors.Is(err, ErrNoSealer) {
		t.Fatalf("credentials without an encryption key: %v", err)
	}
	plain := json.RawMessage(`{"provider":"openai","virtual_key":"v"}`)
	if err := s2.CreateConfig(ctx, &Config{Slug: "e", WorkspaceID: "ws"}, plain); err != nil {
		t.Fatalf("a config without credentials needs no encryption key: %v", err)
	}
	if got, ok := s2.Config("ws", "e"); !ok || string(got.Latest().Config) != string(plain) {
		t.Fatalf("a config without credentials is changed: %s", got.Latest().Config)
	}
}

// TestRedactConfig: the members masked, at any depth and however their
// names are escaped.
func TestRedactConfig(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"provider":"openai"}`, `{"provider":"openai"}`},
		{`{"api_key":"sk-1"}`, `{"api_key":"****"}`},
		{`{"targets":[{"targets":[{"api\u005fkey":"sk-1"}]}]}`, `{"targets":[{"targets":[{"api_key":"****"}]}]}`},
		{`{"clouda_secret_access_key":"a","clouda_session_token":"b","cloudc_service_account_json":{"private_key":"c"}}`,
			`{"clouda_secret_access_key":"****","clouda_session_token":"****","cloudc_service_account_json":"****"}`},
		{`{"x":{"headers":{"a":"1","b":"2"}}}`, `{"x":{"headers":{"a":"****","b":"****"}}}`},
		{`{"x":{"headers":"{\"a\":\"1\"}"}}`, `{"x":{"headers":"****"}}`},
		{`{"api_key":""}`, `{"api_key":""}`},
	}
	for _, tt := range tests {
		got, _ := RedactConfig([]byte(tt.in))
		if string(got) != tt.want {
			t.Errorf("RedactConfig(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestConfigStoredInClearIsSealedByNextWrite: a config version stored
// with its provider key in clear (before configs were sealed) is sealed
// by the next write of the config, and still routes with its key.
func TestConfigStoredInClearIsSealedByNextWrite(t *testing.T) {
	kv, dir := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	legacy := &Config{ID: NewID(), Slug: "old", WorkspaceID: "ws", Status: StatusActive,
		Versions: []ConfigVersion{{VersionID: NewID(), Config: json.RawMessage(`{"provider":"openai","api_key":"sk-legacy-clear-1"}`)}}}
	data, _ := json.Marshal(legacy)
	if err := kv.Store(ctx, s.recordKey(kindConfigs, legacy.ID), data); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateConfig(ctx, legacy.ID, nil, func(c *Config) error { c.Name = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, dir, "sk-legacy-clear-1")
	if c, ok := s.Config("ws", "old"); !ok || !strings.Contains(string(c.Latest().Config), "sk-legacy-clear-1") {
		t.Fatalf("the resealed config does not route with its key: %v", ok)
	}
}
