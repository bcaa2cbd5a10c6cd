package handoff

import (
	"context"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// TestStateCountsOnlyForItsIssuerKeyAndCaller: what one handler hands on
// counts only for the app that vouched for it, the key it was found for
// and the caller it was made for; anything else reads as nothing.
func TestStateCountsOnlyForItsIssuerKeyAndCaller(t *testing.T) {
	var iss, other Issuer
	alice, bob := &identity.Caller{Name: "alice"}, &identity.Caller{Name: "bob"}
	charge := new(budgets.Charge)
	authed := New(&iss)
	authed.SetCaller("key-1", alice)
	authed.MarkBudgeted(charge)
	authed.SetAdmission("rl-1")
	given := New(&iss)
	given.SetGiven(alice)
	unmarked := New(&iss)
	unmarked.SetCaller("key-1", alice)
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		iss        *Issuer
		key        string
		caller     *identity.Caller
		wantCaller *identity.Caller // Caller(iss, key)
		wantGiven  *identity.Caller // Given(iss)
		budgeted   bool             // Budgeted(iss, caller)
		admission  string
	}{
		{"same app, key and caller", With(context.Background(), authed), &iss, "key-1", alice, alice, nil, true, "rl-1"},
		{"another key", With(context.Background(), authed), &iss, "key-2", alice, nil, nil, true, "rl-1"},
		{"another caller's mark", With(context.Background(), authed), &iss, "key-1", bob, alice, nil, false, "rl-1"},
		{"another app", With(context.Background(), authed), &other, "key-1", alice, nil, nil, false, ""},
		{"no issuer", With(context.Background(), authed), nil, "key-1", alice, nil, nil, false, ""},
		{"not marked", With(context.Background(), unmarked), &iss, "key-1", alice, alice, nil, false, ""},
		{"a given caller is no key's holder", With(context.Background(), given), &iss, "", alice, nil, alice, false, ""},
		{"given, another app", With(context.Background(), given), &other, "", alice, nil, nil, false, ""},
		{"nothing carried", context.Background(), &iss, "key-1", alice, nil, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := From(tc.ctx)
			if got, ok := s.Caller(tc.iss, tc.key); got != tc.wantCaller || ok != (tc.wantCaller != nil) {
				t.Errorf("Caller = %v, %v; want %v", got, ok, tc.wantCaller)
			}
			if got, ok := s.Given(tc.iss); got != tc.wantGiven || ok != (tc.wantGiven != nil) {
				t.Errorf("Given = %v, %v; want %v", got, ok, tc.wantGiven)
			}
			got, ok := s.Budgeted(tc.iss, tc.caller)
			if ok != tc.budgeted || (ok && got != charge) {
				t.Errorf("Budgeted = %v, %v; want %v", got, ok, tc.budgeted)
			}
			if a := s.Admission(tc.iss); a != tc.admission {
				t.Errorf("Admission = %q, want %q", a, tc.admission)
			}
		})
	}
}
