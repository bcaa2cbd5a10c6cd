package app

import (
	"context"
	"testing"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestScopedResolverAndAuthErrors: the Caddyfile's virtual keys win and
// are everyone's; an API virtual key is found only in its workspace; a
// refused key's 401 names why.
func TestScopedResolverAndAuthErrors(t *testing.T) {
	h, _ := keys.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	sealer, _ := keys.NewSealer(make([]byte, 32))
	st, err := keys.New(keys.Options{KV: &certmagic.FileStorage{Path: t.TempDir()}, Hasher: h, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Init(ctx); err != nil {
		t.Fatal(err)
	}
	a := &App{logger: zap.NewNop(), virtualKeys: map[string]*providers.Settings{"shared": {Provider: "openai", APIKey: "from-caddyfile"}}}
	a.keyStore = st
	for _, slug := range []string{"mine", "shared"} {
		if err := st.CreateVirtualKey(ctx, &keys.VirtualKey{Slug: slug, WorkspaceID: "ws1"}, providers.Settings{Provider: "openai", APIKey: "from-api"}); err != nil {
			t.Fatal(err)
		}
	}
	r1, r2 := a.For(&identity.Caller{WorkspaceID: "ws1"}), a.For(&identity.Caller{WorkspaceID: "ws2"})
	if v, ok := r1.VirtualKey("mine"); !ok || v.APIKey != "from-api" {
		t.Fatal("the workspace does not find its virtual key")
	}
	if _, ok := r2.VirtualKey("mine"); ok {
		t.Fatal("another workspace finds the virtual key")
	}
	if v, ok := r1.VirtualKey("shared"); !ok || v.APIKey != "from-caddyfile" {
		t.Fatal("the Caddyfile's virtual key does not win")
	}

	key, _ := st.CreateAPIKey(ctx, &keys.APIKey{Name: "k", Scopes: []string{"*"}, WorkspaceID: "ws1", Status: keys.StatusDisabled})
	if _, ok := a.Authenticate(key); ok {
		t.Fatal("a disabled key authenticates")
	}
	for presented, code := range map[string]string{key: "api_key_disabled", keys.NewKey(): "invalid_api_key", "": "invalid_api_key", "sk-provider": "invalid_api_key"} {
		if e := a.AuthError(presented); e.Status != 401 || e.Code != code {
			t.Errorf("AuthError: %d %v, want %s", e.Status, e.Code, code)
		}
	}
	active, _ := st.CreateAPIKey(ctx, &keys.APIKey{Name: "k2", Scopes: []string{"*"}, WorkspaceID: "ws1"})
	if id, ok := a.Authenticate(active); !ok || id.WorkspaceID != "ws1" || id.Source != keys.SourceAPI {
		t.Fatalf("active key: %v %+v", ok, id)
	}
}

// TestScopedResolverOrganisation: a record another organisation put in a
// workspace of the same id is not found by the workspace's keys (nor
// used by a config saved there), as if absent.
func TestScopedResolverOrganisation(t *testing.T) {
	h, _ := keys.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	sealer, _ := keys.NewSealer(make([]byte, 32))
	st, err := keys.New(keys.Options{KV: &certmagic.FileStorage{Path: t.TempDir()}, Hasher: h, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Init(ctx); err != nil {
		t.Fatal(err)
	}
	a := &App{logger: zap.NewNop()}
	a.keyStore = st
	if err := st.CreateVirtualKey(ctx, &keys.VirtualKey{Slug: "theirs", OrganisationID: "org-b", WorkspaceID: "ws1"}, providers.Settings{Provider: "openai", APIKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateConfig(ctx, &keys.Config{Slug: "theirs", OrganisationID: "org-b", WorkspaceID: "ws1"}, []byte(`{"virtual_key":"theirs"}`)); err != nil {
		t.Fatal(err)
	}
	mine := a.For(&identity.Caller{OrganisationID: "org-a", WorkspaceID: "ws1"})
	if _, ok := mine.VirtualKey("theirs"); ok {
		t.Fatal("another organisation's virtual key is found")
	}
	if _, ok := mine.SavedConfig("theirs"); ok {
		t.Fatal("another organisation's config is found")
	}
	theirs := a.For(&identity.Caller{OrganisationID: "org-b", WorkspaceID: "ws1"})
	if _, ok := theirs.VirtualKey("theirs"); !ok {
		t.Fatal("the owner does not find its virtual key")
	}
	if err := a.CheckConfig([]byte(`{"virtual_key":"theirs"}`), "org-a", "ws1"); err == nil {
		t.Fatal("a config of org-a names org-b's virtual key")
	}
}
