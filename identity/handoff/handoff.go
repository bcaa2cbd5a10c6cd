// Package handoff is the state the handlers of one request hand each
// other about its caller: who it is (the identity.Caller the first
// handler to authenticate found), which llm_ratelimit stage admitted it,
// and whether its usage limits were already applied. llm_ratelimit (or a
// clientless run of llm_gateway) sets it once; llm_gateway and the
// handlers after it read it through From.
//
// It is a context value, never a Caddy request variable: variables are
// printable through placeholders, and who a key belongs to is for
// neither logs nor headers. Every read names the Issuer that must have
// set the state (one per llm app, that is per loaded config) and, for
// the caller, the key it must have been found for: a state from another
// config, or found for another key, counts for nothing.
package handoff

import (
	"context"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// Issuer vouches for the states it sets: the llm app holds one, so a
// state set under another app (an older config still serving a request,
// another app instance in a test) is never taken for its own. The zero
// value is ready; only its address matters.
type Issuer struct {
	_ byte // not zero-sized, so every Issuer has an address of its own
}

// State is one request's handed-on state. Build it with New, fill it
// before With, and read it through From: a nil *State reads as empty.
type State struct {
	issuer *Issuer
	// key is the presented gateway key caller was found for; given marks
	// a caller a clientless run was given (a managed batch line runs as
	// its creator and presents no gateway key).
	key    string
	given  bool
	caller *identity.Caller
	// admission is the key of the llm_ratelimit stage that admitted a
	// batch creation request (app.Admission), stored with the batch.
	admission string
	// budgeted says the request's usage limits were applied (reserved on
	// those that match, or none did); charge bills calls made on its
	// behalf to those limits, nil when none applied.
	budgeted bool
	charge   *budgets.Charge
}

// New returns an empty state vouched for by iss.
func New(iss *Issuer) *State { return &State{issuer: iss} }

// SetCaller records c as the holder of the presented key.
func (s *State) SetCaller(key string, c *identity.Caller) { s.key, s.caller, s.given = key, c, false }

// SetGiven records c as the caller of a run no client made, which
// presents no key of its own.
func (s *State) SetGiven(c *identity.Caller) { s.key, s.caller, s.given = "", c, true }

// SetAdmission records the key of the llm_ratelimit stage that admitted
// the request.
func (s *State) SetAdmission(key string) { s.admission = key }

// MarkBudgeted records that the request's usage limits were applied, so
// it is reserved exactly once when it passes both llm_ratelimit and
// llm_gateway; charge is the admission's (nil when none applied).
func (s *State) MarkBudgeted(charge *budgets.Charge) { s.budgeted, s.charge = true, charge }

type ctxKey struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s *State) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// From returns the state of ctx's request, nil when no handler set one.
func From(ctx context.Context) *State {
	s, _ := ctx.Value(ctxKey{}).(*State)
	return s
}

// vouched reports whether s was set under iss.
func (s *State) vouched(iss *Issuer) bool { return s != nil && iss != nil && s.issuer == iss }

// Caller returns the caller found for the presented key under iss; false
// when none was (or it was for another key or issuer, which then counts
// for nothing).
func (s *State) Caller(iss *Issuer, key string) (*identity.Caller, bool) {
	if !s.vouched(iss) || s.given || s.caller == nil || s.key != key {
		return nil, false
	}
	return s.caller, true
}

// Given returns the caller a run no client made was given under iss.
func (s *State) Given(iss *Issuer) (*identity.Caller, bool) {
	if !s.vouched(iss) || !s.given || s.caller == nil {
		return nil, false
	}
	return s.caller, true
}

// Admission returns the key of the llm_ratelimit stage that admitted the
// request under iss; "" when none did.
func (s *State) Admission(iss *Issuer) string {
	if !s.vouched(iss) {
		return ""
	}
	return s.admission
}

// Budgeted reports whether the usage limits of the request, made by c,
// were applied under iss, and the admission's charge. A mark made for
// another caller (another key) counts for nothing.
func (s *State) Budgeted(iss *Issuer, c *identity.Caller) (*budgets.Charge, bool) {
	if !s.vouched(iss) || !s.budgeted || c == nil || s.caller != c {
		return nil, false
	}
	return s.charge, true
}
