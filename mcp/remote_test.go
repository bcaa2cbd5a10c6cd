package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

func testConfig(t *testing.T, raw string) *app.MCPServerConfig {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &app.MCPServerConfig{Name: "s", URL: u, Header: http.Header{"Authorization": {"Bearer up"}, "X-Team": {"t"}}}
}

// TestGuardedClient: the server's headers go to its own origin only, no
// redirect is followed, and the egress guard refuses loopback before any
// connection unless the route allows it.
func TestGuardedClient(t *testing.T) {
	var conns atomic.Int64
	var seen http.Header
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://example.com/", http.StatusFound)
			return
		}
		w.WriteHeader(204)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	cfg := testConfig(t, srv.URL+"/mcp")

	refuse, _ := upstream.NewGuard(nil)
	_, err := guardedClient(context.Background(), cfg, refuse).Get(srv.URL + "/mcp")
	if !errors.Is(err, upstream.ErrBlocked) || conns.Load() != 0 {
		t.Fatalf("loopback without egress_allow: %v, %d connections", err, conns.Load())
	}
	if msg := unreachable("s", err); !strings.Contains(msg, "egress policy") {
		t.Fatalf("unreachable says %q", msg)
	}

	allow, _ := upstream.NewGuard([]string{"loopback"})
	hc := guardedClient(context.Background(), cfg, allow)
	resp, err := hc.Get(srv.URL + "/mcp")
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("allowed: %v %v", resp, err)
	}
	resp.Body.Close()
	if seen.Get("Authorization") != "Bearer up" || seen.Get("X-Team") != "t" {
		t.Fatalf("headers %v", seen)
	}
	resp, err = hc.Get(srv.URL + "/redirect")
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("a redirect was followed: %v %v", resp, err)
	}
	resp.Body.Close()
	// Another origin (an SSE endpoint the server names elsewhere) gets
	// nothing, credentials least of all.
	other := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if _, err := hc.Get(other + "/mcp"); !errors.Is(err, errOtherOrigin) {
		t.Fatalf("another origin: %v", err)
	}
}

// TestSessionRefusedByGuard: opening a session to a refused address
// fails with the guard's refusal, and every waiting caller gets it.
func TestSessionRefusedByGuard(t *testing.T) {
	refuse, _ := upstream.NewGuard(nil)
	u := newRemote(context.Background(), testConfig(t, "http://127.0.0.1:1/mcp"), refuse, newProgressRoutes())
	defer u.close()
	_, err := u.session(context.Background())
	if err == nil || !strings.Contains(unreachable("s", err), "egress policy") {
		t.Fatalf("session: %v", err)
	}
	if _, err := u.listing(context.Background()); err == nil || !strings.Contains(err.Error(), "egress policy") {
		t.Fatalf("listing: %v", err)
	}
}
