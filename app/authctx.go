package app

import (
	"context"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
)

// Issuer is the app's voucher for the state its requests' handlers hand
// each other (package handoff): a state another app set counts for
// nothing here.
func (a *App) Issuer() *handoff.Issuer { return &a.issuer }

// WithAuthenticated returns ctx carrying c as the holder of the presented
// gateway key, as this app authenticated it (handoff.State.SetCaller).
func (a *App) WithAuthenticated(ctx context.Context, key string, c *identity.Caller) context.Context {
	s := handoff.New(a.Issuer())
	s.SetCaller(key, c)
	return handoff.With(ctx, s)
}

// Authenticated returns the caller an earlier handler of the request
// found for key with this same app; false when none did (or did so for
// another key or app, which then counts for nothing).
func (a *App) Authenticated(ctx context.Context, key string) (*identity.Caller, bool) {
	return handoff.From(ctx).Caller(a.Issuer(), key)
}

// Identify is who presented the gateway key presented on a request of
// ctx, the one road every handler authenticating a caller takes: the
// caller a clientless run was given, else the one an earlier handler of
// the request found for this key with this app, else Authenticate. False
// when the key is refused (AuthError says why).
func (a *App) Identify(ctx context.Context, presented string) (*identity.Caller, bool) {
	st := handoff.From(ctx)
	if id, ok := st.Given(a.Issuer()); ok {
		return id, true
	}
	if id, ok := st.Caller(a.Issuer(), presented); ok {
		return id, true
	}
	return a.Authenticate(presented)
}
