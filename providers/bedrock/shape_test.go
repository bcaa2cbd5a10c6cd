package bedrock

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
		{"chat: empty object", chatTranslator{}, "m", `{}`, false},
		{"chat: unknown field", chatTranslator{}, "m", `{"foo":1}`, false},
		{"chat: array", chatTranslator{}, "m", `[]`, false},
		{"chat: not json", chatTranslator{}, "m", `<html>`, false},
		{"chat: too deep", chatTranslator{}, "m", `{"a":` + deep + `}`, false},
		{"chat: invalid utf-8", chatTranslator{}, "m", "{\"a\":\"\xff\"}", false},
		{"titan embed: empty object", embedTranslator{}, "amazon.titan-embed-text-v2:0", `{}`, false},
		{"titan embed: unknown field", embedTranslator{}, "amazon.titan-embed-text-v2:0", `{"foo":1}`, false},
		{"titan embed: array", embedTranslator{}, "amazon.titan-embed-text-v2:0", `[]`, false},
		{"titan embed: not json", embedTranslator{}, "amazon.titan-embed-text-v2:0", `<html>`, false},
		{"titan embed: too deep", embedTranslator{}, "amazon.titan-embed-text-v2:0", `{"a":` + deep + `}`, false},
		{"titan embed: invalid utf-8", embedTranslator{}, "amazon.titan-embed-text-v2:0", "{\"a\":\"\xff\"}", false},
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
