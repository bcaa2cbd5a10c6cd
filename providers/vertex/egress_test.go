package vertex

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// TestTokenURIUnderEgressPolicy: a client-given service account whose
// token_uri is on loopback is refused without a connection under the
// default policy, and works once custom_host_allow admits loopback.
func TestTokenURIUnderEgressPolicy(t *testing.T) {
	srv, fetches := tokenServer(t, http.StatusOK)
	var accepted int
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted++
		}
	}
	sa := serviceAccount(t, "p", srv.URL+"/token")
	body := []byte(`{"messages":[{"role":"user","content":"hi"}]}`)
	deny, _ := upstream.NewGuard(nil)
	allow, _ := upstream.NewGuard([]string{"loopback"})
	p := &provider{}

	_, err := prepare(p, &providers.Call{Op: providers.OpChat, Model: "g", Body: body, Egress: deny}, &providers.Settings{CloudCServiceAccountJSON: sa})
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != "custom_host_not_allowed" {
		t.Fatalf("default policy: err = %#v", err)
	}
	if want := upstream.Refusal(); ae.Message != want.Message {
		t.Fatalf("refusal message %q, want the guard's %q", ae.Message, want.Message)
	}
	if fetches.Load() != 0 || accepted != 0 {
		t.Fatalf("refused token_uri saw %d connections, %d fetches", accepted, fetches.Load())
	}

	u, err := prepare(p, &providers.Call{Op: providers.OpChat, Model: "g", Body: body, Egress: allow}, &providers.Settings{CloudCServiceAccountJSON: sa})
	if err != nil {
		t.Fatalf("loopback allowed: %v", err)
	}
	if u.Header.Get("Authorization") != "Bearer ya29.test-token" || fetches.Load() != 1 {
		t.Fatalf("auth %q after %d fetches", u.Header.Get("Authorization"), fetches.Load())
	}

	// The guarded entry is separate from an operator's (unguarded) one.
	if _, err := prepare(p, &providers.Call{Op: providers.OpChat, Model: "g", Body: body}, &providers.Settings{CloudCServiceAccountJSON: sa}); err != nil {
		t.Fatal(err)
	}
	if len(p.tokens.entries) != 2 {
		t.Fatalf("%d cache entries, want a guarded and an unguarded one", len(p.tokens.entries))
	}
}
