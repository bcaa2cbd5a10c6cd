package anthropic

import (
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestResponseShape: a 2xx answer that is not the provider's shape, or is
// nested too deep, is an error (the gateway's 502), never an empty
// completion with zero usage.
func TestResponseShape(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	tests := []struct {
		name  string
		tr    providers.Translator
		model string
		body  string
		ok    bool
	}{
		{"chat: empty object", Chat{Provider: Slug}, "claude", `{}`, false},
		{"chat: unknown field", Chat{Provider: Slug}, "claude", `{"foo":1}`, false},
		{"chat: array", Chat{Provider: Slug}, "claude", `[]`, false},
		{"chat: not json", Chat{Provider: Slug}, "claude", `<html>`, false},
		{"chat: too deep", Chat{Provider: Slug}, "claude", `{"a":` + deep + `}`, false},
		{"chat: invalid utf-8", Chat{Provider: Slug}, "claude", "{\"a\":\"\xff\"}", false},
		{"chat: content missing", Chat{Provider: Slug}, "claude", `{"type":"message","id":"x"}`, false},
		{"chat: type missing", Chat{Provider: Slug}, "claude", `{"content":[]}`, false},
		{"chat: valid", Chat{Provider: Slug}, "claude", `{"type":"message","id":"m","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":1}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &providers.Call{Op: providers.OpChat, Model: tt.model, Body: []byte(`{}`)}
			out, usage, err := tt.tr.Response(c, []byte(tt.body))
			if tt.ok && err != nil {
				t.Fatalf("valid answer refused: %v", err)
			}
			if !tt.ok && (err == nil || out != nil || usage != nil) {
				t.Fatalf("wrong-shaped answer accepted: %s", out)
			}
		})
	}
}
