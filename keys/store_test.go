package keys

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestStore(t testing.TB, kv kvstore.KV, c *clock) *Store {
	t.Helper()
	h, err := NewHasher(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := NewSealer([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{KV: kv, Hasher: h, Sealer: sealer}
	if c != nil {
		opts.Now = c.now
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func fileKV(t testing.TB) (*certmagic.FileStorage, string) {
	dir := t.TempDir()
	return &certmagic.FileStorage{Path: dir}, dir
}

func TestKeyFormat(t *testing.T) {
	k := NewKey()
	if !IsKey(k) || len(k) != 46 {
		t.Fatalf("NewKey %q is not recognised", k)
	}
	for _, bad := range []string{"", "gw-", "sk-" + k[3:], k + "x", k[:45] + "!", "GW-" + k[3:]} {
		if IsKey(bad) {
			t.Errorf("IsKey(%q) = true", bad)
		}
	}
	if NewKey() == k {
		t.Fatal("two keys are equal")
	}
}

func TestLookupStatuses(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, c)
	ctx := context.Background()
	exp := c.t.Add(time.Hour)
	key, err := s.CreateAPIKey(ctx, &APIKey{Name: "a", ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := s.CreateAPIKey(ctx, &APIKey{Name: "b"})
	_, rb, _ := s.Lookup(other)
	tests := []struct {
		name string
		act  func()
		key  string
		want Result
	}{
		{"valid", func() {}, key, Valid},
		{"unknown", func() {}, NewKey(), Unknown},
		{"not a key", func() {}, "sk-provider", Unknown},
		{"expired", func() { c.t = exp }, key, Expired},
		{"disabled", func() {
			_, _ = s.UpdateAPIKey(ctx, rb.ID, func(r *APIKey) error { r.Status = StatusDisabled; return nil })
		}, other, Disabled},
		{"revoked", func() {
			_, _ = s.UpdateAPIKey(ctx, rb.ID, func(r *APIKey) error { r.Status = StatusRevoked; return nil })
		}, other, Revoked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.act()
			ext, _, res := s.Lookup(tt.key)
			if res != tt.want {
				t.Fatalf("Lookup = %v, want %v", res, tt.want)
			}
			if (res == Valid) != (ext != nil) {
				t.Fatalf("ext %v with result %v", ext, res)
			}
		})
	}
}

func TestRotateGraceAndReplay(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	kv, dir := fileKV(t)
	s := newTestStore(t, kv, c)
	ctx := context.Background()
	old, _ := s.CreateAPIKey(ctx, &APIKey{Name: "a"})
	_, r, _ := s.Lookup(old)
	k1, _, replayed, err := s.RotateAPIKey(ctx, r.ID, "idem-1", time.Hour)
	if err != nil || replayed {
		t.Fatal(err, replayed)
	}
	k2, _, replayed, err := s.RotateAPIKey(ctx, r.ID, "idem-1", time.Hour)
	if err != nil || !replayed || k2 != k1 {
		t.Fatalf("replay: %v %v same=%v", err, replayed, k1 == k2)
	}
	for _, k := range []string{old, k1} {
		if _, _, res := s.Lookup(k); res != Valid {
			t.Fatalf("during grace: %v", res)
		}
	}
	c.t = c.t.Add(time.Hour)
	if _, _, res := s.Lookup(old); res != RotatedOut {
		t.Fatalf("after grace old key: %v", res)
	}
	if _, _, res := s.Lookup(k1); res != Valid {
		t.Fatalf("after grace new key: %v", res)
	}
	k3, _, replayed, _ := s.RotateAPIKey(ctx, r.ID, "idem-2", 0)
	if replayed || k3 == k1 {
		t.Fatal("a new Idempotency-Key must rotate again")
	}
	if _, _, res := s.Lookup(k1); res != RotatedOut {
		t.Fatalf("zero grace: old key %v", res)
	}
	assertNoSecret(t, dir, old, k1, k3, "idem-1", "idem-2")
}

// assertNoSecret greps every stored file for the secrets.
func assertNoSecret(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds a secret", p)
			}
		}
		return nil
	})
}

func TestVirtualKeySealed(t *testing.T) {
	kv, dir := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	vk := &VirtualKey{Slug: "openai", Name: "openai", WorkspaceID: "ws1"}
	if err := s.CreateVirtualKey(ctx, vk, providers.Settings{Provider: "openai", APIKey: "sk-provider-secret-123456"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVirtualKey(ctx, &VirtualKey{Slug: "openai", WorkspaceID: "ws1"}, providers.Settings{Provider: "openai"}); err != ErrConflict {
		t.Fatalf("same slug: %v", err)
	}
	st, ok := s.VirtualKey("ws1", "openai")
	if !ok || st.APIKey != "sk-provider-secret-123456" {
		t.Fatalf("VirtualKey: %v %+v", ok, st)
	}
	if _, ok := s.VirtualKey("ws2", "openai"); ok {
		t.Fatal("another workspace sees the virtual key")
	}
	assertNoSecret(t, dir, "sk-provider-secret-123456")
	// Another store without the encryption key cannot open it.
	h, _ := NewHasher(testSecret)
	s2, _ := New(Options{KV: kv, Hasher: h})
	_ = s2.Init(ctx)
	if _, ok := s2.VirtualKey("ws1", "openai"); ok {
		t.Fatal("opened without the encryption key")
	}
	if err := s2.CreateVirtualKey(ctx, &VirtualKey{Slug: "x", WorkspaceID: "ws1"}, providers.Settings{Provider: "openai", APIKey: "sk-1"}); err != ErrNoSealer {
		t.Fatalf("without a sealer: %v", err)
	}
}

func TestConfigVersions(t *testing.T) {
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	c := &Config{Slug: "c", WorkspaceID: "ws"}
	if err := s.CreateConfig(ctx, c, json.RawMessage(`{"provider":"openai"}`)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < MaxConfigVersions+3; i++ {
		if _, err := s.UpdateConfig(ctx, c.ID, json.RawMessage(fmt.Sprintf(`{"provider":"openai","n":%d}`, i)), func(*Config) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	got, ok := s.Config("ws", "c")
	if !ok || len(got.Versions) != MaxConfigVersions || !strings.Contains(string(got.Latest().Config), fmt.Sprint(MaxConfigVersions+2)) {
		t.Fatalf("versions: %v %d", ok, len(got.Versions))
	}
	if err := s.DeleteConfig(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Config("ws", "c"); ok {
		t.Fatal("deleted config still served")
	}
}

// TestPropagationFileStorage: a second store on the same storage sees a
// revocation at its next poll.
func TestPropagationFileStorage(t *testing.T) {
	kv, _ := fileKV(t)
	testPropagation(t, kv, nil, kv, nil)
}

// propagationDB is the Redis database TestPropagationRedis flushes; no
// other test uses it.
const propagationDB = 15

// TestPropagationRedis: two stores on one Redis (two gateway instances)
// see each other's revocation through pub/sub; the test reports how long
// it took.
func TestPropagationRedis(t *testing.T) {
	// A database of its own: it is flushed, and packages' tests run at
	// the same time (integration's Redis outage test uses 13).
	c := redistest.Client(t, propagationDB)
	c.FlushDB(context.Background())
	c2 := redistest.Client(t, propagationDB)
	testPropagation(t, kvstore.NewRedis(c, 0), c, kvstore.NewRedis(c2, 0), c2)
}

func testPropagation(t *testing.T, kv1 kvstore.KV, r1 interface{}, kv2 kvstore.KV, r2 interface{}) {
	mk := func(kv kvstore.KV, r interface{}) *Store {
		h, _ := NewHasher(testSecret)
		opts := Options{KV: kv, Hasher: h, Poll: 200 * time.Millisecond}
		setRedis(&opts, r)
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Init(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Stop)
		return s
	}
	a, b := mk(kv1, r1), mk(kv2, r2)
	ctx := context.Background()
	key, err := a.CreateAPIKey(ctx, &APIKey{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, key, Valid)
	_, rec, _ := a.Lookup(key)
	start := time.Now()
	if _, err := a.UpdateAPIKey(ctx, rec.ID, func(r *APIKey) error { r.Status = StatusRevoked; return nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, key, Revoked)
	t.Logf("revocation seen by the other instance after %v", time.Since(start))
}

// waitFor waits until s answers want for key; it fails only when the
// change never arrives (a bound far above the poll interval).
func waitFor(t *testing.T, s *Store, key string, want Result) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if _, _, res := s.Lookup(key); res == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the other store never saw %v", want)
}

// TestNotReady: a store whose KV does not answer at start refuses every
// key and write until Init succeeds, then serves the records.
func TestNotReady(t *testing.T) {
	kv, _ := fileKV(t)
	ready := newTestStore(t, kv, nil)
	key, err := ready.CreateAPIKey(context.Background(), &APIKey{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	down := true
	s, _ := New(Options{KV: kv, Secret: func(ctx context.Context) ([]byte, error) {
		if down {
			return nil, fmt.Errorf("connection refused")
		}
		return testSecret, nil
	}})
	if err := s.Init(context.Background()); err == nil || s.Ready() {
		t.Fatal("Init succeeded without its KV")
	}
	if _, _, res := s.Lookup(key); res != Unknown {
		t.Fatalf("Lookup before Init: %v", res)
	}
	if _, err := s.CreateAPIKey(context.Background(), &APIKey{Name: "b"}); err != ErrNotReady {
		t.Fatalf("write before Init: %v", err)
	}
	down = false
	if err := s.Init(context.Background()); err != nil || !s.Ready() {
		t.Fatal(err)
	}
	if _, _, res := s.Lookup(key); res != Valid {
		t.Fatalf("Lookup after Init: %v", res)
	}
}

// TestEncryptionKeyRotation: with the new key first and the old one kept,
// records sealed before open, and a write seals them with the new key, so
// the old key can then go.
func TestEncryptionKeyRotation(t *testing.T) {
	kv, _ := fileKV(t)
	ctx := context.Background()
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	open := func(keys ...[]byte) *Store {
		h, _ := NewHasher(testSecret)
		sealer, _ := NewSealer(keys...)
		s, _ := New(Options{KV: kv, Hasher: h, Sealer: sealer})
		if err := s.Init(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	vk := &VirtualKey{Slug: "v", WorkspaceID: "ws"}
	if err := open(oldKey).CreateVirtualKey(ctx, vk, providers.Settings{Provider: "openai", APIKey: "sk-1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := open(newKey).VirtualKey("ws", "v"); ok {
		t.Fatal("opened with the wrong key")
	}
	both := open(newKey, oldKey)
	if v, ok := both.VirtualKey("ws", "v"); !ok || v.APIKey != "sk-1" {
		t.Fatal("the previous key does not open the record")
	}
	if _, err := both.UpdateVirtualKey(ctx, vk.ID, func(r *VirtualKey, _ *providers.Settings) error { r.Note = "rewrite"; return nil }); err != nil {
		t.Fatal(err)
	}
	if v, ok := open(newKey).VirtualKey("ws", "v"); !ok || v.APIKey != "sk-1" {
		t.Fatal("the rewritten record does not open with the new key alone")
	}
}
