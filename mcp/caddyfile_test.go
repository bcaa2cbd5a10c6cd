package mcp

import (
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	tests := []struct {
		in      string
		check   func(*Handler) bool
		wantErr string
	}{
		{in: "llm_mcp", check: func(h *Handler) bool { return len(h.EgressAllow) == 0 && h.MaxRequestBody == 0 }},
		{in: "llm_mcp {\n egress_allow loopback\n egress_allow 10.0.0.0/8 private\n max_request_body 1MiB\n}",
			check: func(h *Handler) bool {
				return slices.Equal(h.EgressAllow, []string{"loopback", "10.0.0.0/8", "private"}) && h.MaxRequestBody == 1<<20
			}},
		{in: "llm_mcp extra", wantErr: "wrong argument count"},
		{in: "llm_mcp {\n egress_allow\n}", wantErr: "wrong argument count"},
		{in: "llm_mcp {\n max_request_body lots\n}", wantErr: "invalid size"},
		{in: "llm_mcp {\n command /bin/sh\n}", wantErr: `unknown llm_mcp option "command"`},
	}
	for _, tt := range tests {
		h := new(Handler)
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !tt.check(h) {
			t.Errorf("%q: %v, %+v", tt.in, err, h)
		}
	}
}
