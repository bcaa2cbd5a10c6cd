package cohere

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
		{"chat: empty object", chat{}, "command", `{}`, false},
		{"chat: unknown field", chat{}, "command", `{"foo":1}`, false},
		{"chat: array", chat{}, "command", `[]`, false},
		{"chat: not json", chat{}, "command", `<html>`, false},
		{"chat: too deep", chat{}, "command", `{"a":` + deep + `}`, false},
		{"chat: invalid utf-8", chat{}, "command", "{\"a\":\"\xff\"}", false},
		{"chat: valid", chat{}, "command", `{"id":"x","message":{"role":"assistant","content":[{"type":"text","text":"hi"}]},"finish_reason":"COMPLETE"}`, true},
		{"embed: empty object", embeddings{}, "embed", `{}`, false},
		{"embed: unknown field", embeddings{}, "embed", `{"foo":1}`, false},
		{"embed: array", embeddings{}, "embed", `[]`, false},
		{"embed: not json", embeddings{}, "embed", `<html>`, false},
		{"embed: too deep", embeddings{}, "embed", `{"a":` + deep + `}`, false},
		{"embed: invalid utf-8", embeddings{}, "embed", "{\"a\":\"\xff\"}", false},
		{"embed: float missing", embeddings{}, "embed", `{"embeddings":{}}`, false},
		{"embed: valid", embeddings{}, "embed", `{"embeddings":{"float":[[0.1]]}}`, true},
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
