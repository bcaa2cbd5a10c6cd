package gemini

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
		{"chat: empty object", Chat{Provider: Slug}, "gemini", `{}`, false},
		{"chat: unknown field", Chat{Provider: Slug}, "gemini", `{"foo":1}`, false},
		{"chat: array", Chat{Provider: Slug}, "gemini", `[]`, false},
		{"chat: not json", Chat{Provider: Slug}, "gemini", `<html>`, false},
		{"chat: too deep", Chat{Provider: Slug}, "gemini", `{"a":` + deep + `}`, false},
		{"chat: invalid utf-8", Chat{Provider: Slug}, "gemini", "{\"a\":\"\xff\"}", false},
		{"chat: valid", Chat{Provider: Slug}, "gemini", `{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`, true},
		{"chat: blocked prompt", Chat{Provider: Slug}, "gemini", `{"promptFeedback":{"blockReason":"SAFETY"}}`, true},
		{"embed: empty object", embeddings{}, "e", `{}`, false},
		{"embed: unknown field", embeddings{}, "e", `{"foo":1}`, false},
		{"embed: array", embeddings{}, "e", `[]`, false},
		{"embed: not json", embeddings{}, "e", `<html>`, false},
		{"embed: too deep", embeddings{}, "e", `{"a":` + deep + `}`, false},
		{"embed: invalid utf-8", embeddings{}, "e", "{\"a\":\"\xff\"}", false},
		{"embed: values missing", embeddings{}, "e", `{"embeddings":[{}]}`, false},
		{"embed: valid", embeddings{}, "e", `{"embeddings":[{"values":[0.1]}]}`, true},
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
