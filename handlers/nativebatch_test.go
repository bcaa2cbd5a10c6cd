package handlers

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

func TestBatchModeCaddyfile(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{"llm_gateway", "", false},
		{"llm_gateway {\n batch_mode native\n}", BatchNative, false},
		{"llm_gateway {\n batch_mode managed\n}", BatchManaged, false},
		{"llm_gateway {\n batch_mode sometimes\n}", "", true},
		{"llm_gateway {\n batch_mode\n}", "", true},
		{"llm_gateway {\n batch_mode native managed\n}", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var g Gateway
			err := g.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.in))
			if (err != nil) != tt.bad || (!tt.bad && g.BatchMode != tt.want) {
				t.Fatalf("batch_mode %q, err %v", g.BatchMode, err)
			}
		})
	}
}

func TestSentModel(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]json.RawMessage
		want      string
	}{
		{"the line's", nil, "claude-a"},
		{"override_params", map[string]json.RawMessage{"model": json.RawMessage(`"claude-b"`)}, "claude-b"},
		{"not a string", map[string]json.RawMessage{"model": json.RawMessage(`7`)}, "claude-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &nativeRoute{t: &routing.Target{OverrideParams: tt.overrides}}
			if got := n.sentModel("claude-a"); got != tt.want {
				t.Fatalf("model %q, want %q", got, tt.want)
			}
		})
	}
}
