package jwtauth

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/jwtauth/jwttest"
)

// TestObserve: the observer hears each validation the cache did not
// answer (an accepted user once per cache_ttl, not per request), and a
// user the mapping refuses comes with its user id, the one its accepted
// caller had, so its record can be disabled.
func TestObserve(t *testing.T) {
	is := jwttest.New()
	defer is.Close()
	ttl := 30 * time.Second
	a, clk := newAuth(t, is, Config{UserInfo: true, CacheTTL: caddy.Duration(ttl), Groups: []Group{{Name: "llm-users"}}})
	var seen []string
	a.Observe(func(id *identity.Caller, r *Reason) {
		switch {
		case id != nil:
			seen = append(seen, "ok:"+id.KeyID)
		case r != nil:
			seen = append(seen, r.Code+":"+r.UserID)
		}
	})
	is.SetUser("alice", map[string]any{"groups": []string{"llm-users"}})
	tok := is.Mint(is.Std("alice", "gateway", time.Hour))
	id, _ := a.Authenticate(context.Background(), tok)
	for range 3 {
		_, _ = a.Authenticate(context.Background(), tok)
	}
	is.SetUser("alice", map[string]any{"groups": []string{"other"}})
	clk.add(ttl + time.Second)
	_, _ = a.Authenticate(context.Background(), tok)
	_, _ = a.Authenticate(context.Background(), "eyJhbGciOiJub25lIn0.e30.")
	want := []string{"ok:" + id.KeyID, CodeForbidden + ":" + id.KeyID, CodeInvalidToken + ":"}
	if len(seen) != len(want) {
		t.Fatalf("observed %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("observation %d: %q, want %q", i, seen[i], want[i])
		}
	}
}
