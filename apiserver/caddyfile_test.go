package apiserver

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"llm_api", true},
		{"llm_api extra", false},
		{"llm_api {\n\tfoo\n}", false},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("%q: err %v", tt.in, err)
		}
	}
}
