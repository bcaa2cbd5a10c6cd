package app

import (
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"

	"context"
	"testing"
)

func TestAuthenticated(t *testing.T) {
	a, other := &App{}, &App{}
	id := &identity.Caller{Name: "k"}
	ctx := a.WithAuthenticated(context.Background(), "key-1", id)
	for _, tc := range []struct {
		name string
		app  *App
		ctx  context.Context
		key  string
		want bool
	}{
		{"same app and key", a, ctx, "key-1", true},
		{"another key", a, ctx, "key-2", false},
		{"another app", other, ctx, "key-1", false},
		{"nothing carried", a, context.Background(), "key-1", false},
	} {
		got, ok := tc.app.Authenticated(tc.ctx, tc.key)
		if ok != tc.want || (ok && got != id) {
			t.Errorf("%s: %v %v", tc.name, got, ok)
		}
	}
}
