package console

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
		api  string
		ttl  time.Duration
	}{
		{name: "bare", in: `llm_console`, ok: true},
		{name: "options", in: "llm_console {\n api http://127.0.0.1:8787/v1\n session_ttl 1h\n}", ok: true, api: "http://127.0.0.1:8787/v1", ttl: time.Hour},
		{name: "argument", in: `llm_console now`},
		{name: "api without value", in: "llm_console {\n api\n}"},
		{name: "api two values", in: "llm_console {\n api http://a/v1 http://b/v1\n}"},
		{name: "api not http", in: "llm_console {\n api file:///etc/passwd\n}"},
		{name: "api with credentials", in: "llm_console {\n api http://u:p@host/v1\n}"},
		{name: "zero ttl", in: "llm_console {\n session_ttl 0s\n}"},
		{name: "bad ttl", in: "llm_console {\n session_ttl soon\n}"},
		{name: "unknown", in: "llm_console {\n theme dark\n}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && (h.API != tc.api || time.Duration(h.SessionTTL) != tc.ttl) {
				t.Fatalf("got %+v", h)
			}
		})
	}
}
