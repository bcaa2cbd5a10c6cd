package app

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestUnmarshalAPI: `api <module>...` names registered management API
// modules only (feedback is registered by package controlplane).
func TestUnmarshalAPI(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"llm {\n\tapi feedback\n}", []string{"feedback"}},
		{"llm {\n\tapi\n}", nil},
		{"llm {\n\tapi no_such_api\n}", nil},
	} {
		var a App
		err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.in))
		if (err == nil) != (tt.want != nil) {
			t.Fatalf("%q: err %v", tt.in, err)
		}
		for _, n := range tt.want {
			if _, ok := a.API[n]; !ok {
				t.Fatalf("%q: api %v", tt.in, a.API)
			}
		}
	}
}
