package handlers

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// TestClientlessRequest: Run and the semantic cache's embeddings build
// their requests one way: the gateway's internal URL, the given header
// (or an empty one), a loopback client address, and a Caddy server and
// replacer of their own so attempts can record what they dial.
func TestClientlessRequest(t *testing.T) {
	cases := []struct {
		name, method, path string
		header             http.Header
		wantCT             string
	}{
		{"embeddings", http.MethodPost, "/v1/embeddings", http.Header{"Content-Type": {"application/json"}}, "application/json"},
		{"no header", http.MethodGet, "/v1/models", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &memoryWriter{header: make(http.Header), max: 1 << 10}
			type ctxKey struct{}
			ctx := context.WithValue(context.Background(), ctxKey{}, "kept")
			r, err := clientlessRequest(ctx, tc.method, tc.path, tc.header, []byte("body"), w)
			if err != nil {
				t.Fatal(err)
			}
			if r.Method != tc.method || r.URL.String() != "http://llm-gateway.internal"+tc.path || r.RemoteAddr != "127.0.0.1:0" {
				t.Fatalf("request %s %s from %s", r.Method, r.URL, r.RemoteAddr)
			}
			if r.Header == nil || r.Header.Get("Content-Type") != tc.wantCT {
				t.Fatalf("header %v", r.Header)
			}
			if r.Context().Value(ctxKey{}) != "kept" {
				t.Fatal("the caller's context values were lost")
			}
			if _, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); !ok {
				t.Fatal("no replacer")
			}
			if _, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); !ok {
				t.Fatal("no server")
			}
			if b, _ := io.ReadAll(r.Body); string(b) != "body" {
				t.Fatalf("body %q", b)
			}
		})
	}
}

// TestAuthenticateTakesCarriedIdentity: the identity llm_ratelimit found
// for the presented key (with the same app) is the caller; another key's
// carried identity is not, and such a key is authenticated by the app.
func TestAuthenticateTakesCarriedIdentity(t *testing.T) {
	a := &app.App{}
	g := &Gateway{app: a}
	id := &identity.Caller{Name: "carried"}
	r, _ := http.NewRequest(http.MethodGet, "/v1/models", nil)
	r = r.WithContext(a.WithAuthenticated(r.Context(), "presented", id))
	if got, ok := g.authenticate(r, "presented"); !ok || got != id {
		t.Fatalf("carried identity not taken: %v %v", got, ok)
	}
	if got, ok := g.authenticate(r, "another"); ok {
		t.Fatalf("another key got %v", got)
	}
}
