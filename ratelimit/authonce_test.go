package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// carryingControl counts authentications and vouches for the state
// handed on, as *app.App does.
type carryingControl struct {
	*fakeControl
	auths int
	iss   handoff.Issuer
}

func (c *carryingControl) Authenticate(key string) (*identity.Caller, bool) {
	c.auths++
	return c.fakeControl.Authenticate(key)
}

func (c *carryingControl) Issuer() *handoff.Issuer { return &c.iss }

// TestAuthenticatedOnceAndPassedOn: a request no policy applies to is not
// authenticated here; one a policy applies to is authenticated once, and
// the identity goes on to the next handler in the request's context.
func TestAuthenticatedOnceAndPassedOn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policy    bool
		wantAuths int
		wantID    *identity.Caller
	}{
		{"no policy", false, 0, nil},
		{"a policy applies", true, 1, testAlice},
	} {
		ctl := &carryingControl{fakeControl: newControl()}
		if tc.policy {
			addPolicy(t, ctl.fakeControl, policies.TypeRequests, policies.UnitRPM, 100, cond("api_key", "*"), "api_key")
		}
		h := newHandler(t, ctl)
		var seen *identity.Caller
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			seen, _ = handoff.From(r.Context()).Caller(ctl.Issuer(), "key-alice")
			return nil
		})
		if err := h.ServeHTTP(httptest.NewRecorder(), newRequest("key-alice", []byte(chatBody)), next); err != nil {
			t.Fatal(err)
		}
		if ctl.auths != tc.wantAuths || seen != tc.wantID {
			t.Errorf("%s: %d authentications, identity passed on %v", tc.name, ctl.auths, seen)
		}
	}
}
