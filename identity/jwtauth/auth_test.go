package jwtauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/go-jose/go-jose/v4"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth/jwttest"
)

// clock is a settable time for the cache and expiry tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newAuth(t *testing.T, is *jwttest.Issuer, cfg Config) (*Authenticator, *clock) {
	t.Helper()
	cfg.Issuer = is.URL
	if cfg.Audience == nil {
		cfg.Audience = []string{"gateway"}
	}
	a, err := New(cfg, is.Client())
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Now()}
	a.now = c.now
	return a, c
}

// TestTokenValidation refuses each kind of bad token with its code and
// accepts RSA- and EC-signed ones.
func TestTokenValidation(t *testing.T) {
	is := jwttest.New()
	defer is.Close()
	a, _ := newAuth(t, is, Config{})
	std := func() jwttest.Claims { return is.Std("alice", "gateway", time.Minute) }
	with := func(k string, v any) jwttest.Claims { c := std(); c[k] = v; return c }
	without := func(k string) jwttest.Claims { c := std(); delete(c, k); return c }
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	dup := func(a, b string) string {
		return is.MintRaw([]byte(`{"iss":"` + is.URL + `","` + a + `":"alice","` + b + `":"y","aud":"gateway","exp":9999999999}`))
	}
	for _, tc := range []struct {
		name, token, code string
	}{
		{"rsa", is.Mint(std()), ""},
		{"ec", is.MintWith(1, std()), ""},
		{"audience array", is.Mint(with("aud", []string{"other", "gateway"})), ""},
		{"expired within skew", is.Mint(with("exp", time.Now().Add(-10*time.Second).Unix())), ""},
		{"wrong audience", is.Mint(with("aud", "other")), CodeAudience},
		{"no audience", is.Mint(without("aud")), CodeAudience},
		{"wrong issuer", is.Mint(with("iss", "https://evil.example")), CodeIssuer},
		{"expired", is.Mint(with("exp", time.Now().Add(-time.Hour).Unix())), CodeExpired},
		{"no exp", is.Mint(without("exp")), CodeInvalidToken},
		{"no sub", is.Mint(without("sub")), CodeInvalidToken},
		{"nbf future", is.Mint(with("nbf", time.Now().Add(time.Hour).Unix())), CodeInvalidToken},
		{"iat future", is.Mint(with("iat", time.Now().Add(time.Hour).Unix())), CodeInvalidToken},
		{"alg none", jwttest.Unsigned(std()), CodeInvalidToken},
		{"hs256 with the public key", jwttest.Sign(jose.HS256, is.PublicRSA(), is.DefaultKID(), std()), CodeInvalidToken},
		{"forged rsa, known kid", jwttest.Sign(jose.RS256, otherRSA, is.DefaultKID(), std()), CodeInvalidToken},
		{"forged ec, unknown kid", jwttest.Sign(jose.ES256, otherEC, "nope", std()), CodeInvalidToken},
		{"rsa key, es256 header", jwttest.Sign(jose.ES256, otherEC, is.DefaultKID(), std()), CodeInvalidToken},
		{"malformed", "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln", CodeInvalidToken},
		{"oversized", "eyJ" + strings.Repeat("a", MaxTokenBytes) + ".a.b", CodeInvalidToken},
		{"duplicate claim", dup("sub", "sub"), CodeInvalidToken},
		{"case-variant claim", dup("sub", "Sub"), CodeInvalidToken},
		{"raw ok", dup("sub", "other"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, r := a.Authenticate(context.Background(), tc.token)
			if tc.code == "" {
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
				if id.Name != "user:alice" || id.Source != identity.SourceOIDC || id.KeyID == "" || id.AllScopes() {
					t.Fatalf("caller %+v", id)
				}
				return
			}
			if r == nil || r.Code != tc.code {
				t.Fatalf("got %v (%+v), want code %s", r, id, tc.code)
			}
		})
	}
}

// TestKeyRotation accepts a token signed with a key the IdP published
// after the cache was filled (one refetch), and bounds the refetches a
// flood of unknown kids causes.
func TestKeyRotation(t *testing.T) {
	is := jwttest.New()
	defer is.Close()
	a, clk := newAuth(t, is, Config{})
	if _, r := a.Authenticate(context.Background(), is.Mint(is.Std("a", "gateway", time.Minute))); r != nil {
		t.Fatal(r)
	}
	is.Rotate()
	if _, r := a.Authenticate(context.Background(), is.Mint(is.Std("b", "gateway", time.Minute))); r != nil {
		t.Fatalf("rotated key refused: %v", r)
	}
	before := is.JWKSFetches()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for i := range 200 {
		tok := jwttest.Sign(jose.ES256, other, "flood-"+string(rune('a'+i%26))+strings.Repeat("x", i), is.Std("c", "gateway", time.Minute))
		if _, r := a.Authenticate(context.Background(), tok); r == nil {
			t.Fatal("forged token accepted")
		}
	}
	if n := is.JWKSFetches() - before; n > RefetchBurst {
		t.Fatalf("a flood of unknown kids fetched the JWKS %d times, want at most %d", n, RefetchBurst)
	}
	// The bucket refills: a later rotation is still picked up.
	clk.add(RefetchBurst * RefetchEvery)
	is.Rotate()
	if _, r := a.Authenticate(context.Background(), is.Mint(is.Std("d", "gateway", time.Minute))); r != nil {
		t.Fatalf("rotated key refused after the flood: %v", r)
	}
}

// TestGroupRemovedWithinTTL: with userinfo, a user removed from the
// group keeps access from the cache until cache_ttl ends, then loses it,
// with the very same token.
func TestGroupRemovedWithinTTL(t *testing.T) {
	is := jwttest.New()
	defer is.Close()
	ttl := 30 * time.Second
	a, clk := newAuth(t, is, Config{UserInfo: true, CacheTTL: caddy.Duration(ttl),
		Groups: []Group{{Name: "llm-users", Scopes: []string{"api_keys.read"}, Models: []string{"gpt-4o*"}, VirtualKey: "team"}}})
	is.SetUser("alice", map[string]any{"groups": []string{"llm-users"}})
	tok := is.Mint(is.Std("alice", "gateway", time.Hour))
	id, r := a.Authenticate(context.Background(), tok)
	if r != nil {
		t.Fatal(r)
	}
	if !id.Can("api_keys.list") || !id.AllowsModel("gpt-4o-mini") || id.AllowsModel("o3") || id.Defaults.VirtualKey != "team" {
		t.Fatalf("group not mapped: %+v", id)
	}
	is.SetUser("alice", map[string]any{"groups": []string{"other"}})
	clk.add(ttl - time.Second)
	if _, r := a.Authenticate(context.Background(), tok); r != nil {
		t.Fatalf("refused within the TTL (the cache is the documented bound): %v", r)
	}
	clk.add(2 * time.Second)
	if _, r := a.Authenticate(context.Background(), tok); r == nil || r.Code != CodeForbidden {
		t.Fatalf("removed user still admitted after the TTL: %v", r)
	}
}

// TestClaimMapping maps workspace, scopes, models, domains and groups.
func TestClaimMapping(t *testing.T) {
	is := jwttest.New()
	defer is.Close()
	a, _ := newAuth(t, is, Config{AllowedDomains: []string{"Example.com"},
		Claims: Claims{Workspace: "ws", Scopes: "gw_scopes", Models: "models"},
		Groups: []Group{{Name: "admins", Type: identity.TypeOrganisation, WorkspaceID: "ws-admin"}, {Name: "devs", Models: []string{"o3"}}}})
	mint := func(extra map[string]any) string {
		c := is.Std("bob", "gateway", time.Minute)
		for k, v := range extra {
			c[k] = v
		}
		return is.Mint(c)
	}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		check func(*identity.Caller) bool
		code  string
	}{
		{"org admin", map[string]any{"email": "bob@example.com", "groups": []string{"devs", "admins"}},
			func(c *identity.Caller) bool {
				return c.Type == identity.TypeOrganisation && c.WorkspaceID == "ws-admin" && c.AllowsModel("o3") && !c.AllowsModel("x")
			}, ""},
		{"claims", map[string]any{"email": "bob@example.com", "groups": "devs", "ws": "0b7f3b36-5a5e-4c1e-9d1c-2f6d1e4b9a01", "gw_scopes": "configs.read api_keys.*", "models": []string{"gpt-*"}},
			func(c *identity.Caller) bool {
				return c.WorkspaceID == "0b7f3b36-5a5e-4c1e-9d1c-2f6d1e4b9a01" && c.Can("configs.list") && c.Can("api_keys.update") && c.AllowsModel("gpt-4o")
			}, ""},
		{"workspace claim not a uuid", map[string]any{"email": "bob@example.com", "groups": "devs", "ws": "../x"}, nil, CodeForbidden},
		{"no group", map[string]any{"email": "bob@example.com", "groups": []string{"sales"}}, nil, CodeForbidden},
		{"other domain", map[string]any{"email": "bob@evil.com", "groups": []string{"devs"}}, nil, CodeForbidden},
		{"unverified email", map[string]any{"email": "bob@example.com", "email_verified": false, "groups": []string{"devs"}}, nil, CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, r := a.Authenticate(context.Background(), mint(tc.extra))
			if tc.code != "" {
				if r == nil || r.Code != tc.code {
					t.Fatalf("got %v %+v, want %s", r, id, tc.code)
				}
				return
			}
			if r != nil || !tc.check(id) {
				t.Fatalf("got %v %+v", r, id)
			}
		})
	}
}

// TestConfigRefusesSymmetric refuses none and HS* in the allow-list.
func TestConfigRefusesSymmetric(t *testing.T) {
	for _, alg := range []string{"none", "HS256", "HS512"} {
		if _, err := New(Config{Issuer: "https://idp.example", Audience: []string{"a"}, Algorithms: []string{alg}}, nil); err == nil {
			t.Fatalf("%s accepted", alg)
		}
	}
	if _, err := New(Config{Issuer: "https://idp.example", Audience: []string{"a"}, Algorithms: []string{"ES256"}}, nil); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAuthenticateCached is a token answered from the cache (the
// issue's bound: at most 5 µs added per request).
func BenchmarkAuthenticateCached(b *testing.B) {
	is := jwttest.New()
	defer is.Close()
	a, err := New(Config{Issuer: is.URL, Audience: []string{"gateway"}}, is.Client())
	if err != nil {
		b.Fatal(err)
	}
	c := is.Std("alice", "gateway", time.Hour)
	c["groups"] = []string{"a", "b", "c", "d"}
	tok := is.Mint(c)
	if _, r := a.Authenticate(context.Background(), tok); r != nil {
		b.Fatal(r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, r := a.Authenticate(context.Background(), tok); r != nil {
			b.Fatal(r)
		}
	}
}
