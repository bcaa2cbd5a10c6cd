package vertex

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
		{"embed: empty object", embeddings{}, "text-embedding", `{}`, false},
		{"embed: unknown field", embeddings{}, "text-embedding", `{"foo":1}`, false},
		{"embed: array", embeddings{}, "text-embedding", `[]`, false},
		{"embed: not json", embeddings{}, "text-embedding", `<html>`, false},
		{"embed: too deep", embeddings{}, "text-embedding", `{"a":` + deep + `}`, false},
		{"embed: invalid utf-8", embeddings{}, "text-embedding", "{\"a\":\"\xff\"}", false},
		{"embed: values missing", embeddings{}, "text-embedding", `{"predictions":[{"embeddings":{}}]}`, false},
		{"embed: valid", embeddings{}, "text-embedding", `{"predictions":[{"embeddings":{"values":[0.1]}}]}`, true},
		{"claude: empty object", chat{}, "claude-x", `{}`, false},
		{"claude: unknown field", chat{}, "claude-x", `{"foo":1}`, false},
		{"claude: array", chat{}, "claude-x", `[]`, false},
		{"claude: not json", chat{}, "claude-x", `<html>`, false},
		{"claude: too deep", chat{}, "claude-x", `{"a":` + deep + `}`, false},
		{"claude: invalid utf-8", chat{}, "claude-x", "{\"a\":\"\xff\"}", false},
		{"claude: valid", chat{}, "claude-x", `{"type":"message","id":"m","content":[]}`, true},
		{"gemini: empty object", chat{}, "gemini-x", `{}`, false},
		{"gemini: unknown field", chat{}, "gemini-x", `{"foo":1}`, false},
		{"gemini: array", chat{}, "gemini-x", `[]`, false},
		{"gemini: not json", chat{}, "gemini-x", `<html>`, false},
		{"gemini: too deep", chat{}, "gemini-x", `{"a":` + deep + `}`, false},
		{"gemini: invalid utf-8", chat{}, "gemini-x", "{\"a\":\"\xff\"}", false},
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
