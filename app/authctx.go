package app

import (
	"context"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// authenticatedKey carries, in one request's context, the identity an
// earlier handler of the request (llm_ratelimit) authenticated, so
// llm_gateway does not authenticate the same key again. It is a context
// value, not a Caddy variable: variables are readable through
// placeholders, and who a key belongs to is for neither logs nor
// headers.
type authenticatedKey struct{}

type authenticated struct {
	app *App
	key string
	id  *identity.Caller
}

// WithAuthenticated returns ctx carrying id as the holder of the
// presented gateway key, as a authenticated it.
func (a *App) WithAuthenticated(ctx context.Context, key string, id *identity.Caller) context.Context {
	return context.WithValue(ctx, authenticatedKey{}, &authenticated{app: a, key: key, id: id})
}

// Authenticated returns the identity an earlier handler of the request
// found for key with this same app; false when none did (or did so for
// another key or app, which then counts for nothing).
func (a *App) Authenticated(ctx context.Context, key string) (*identity.Caller, bool) {
	v, _ := ctx.Value(authenticatedKey{}).(*authenticated)
	if v == nil || v.app != a || v.key != key || v.id == nil {
		return nil, false
	}
	return v.id, true
}
