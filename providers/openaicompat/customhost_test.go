package openaicompat

import (
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestCustomHost: custom_host replaces the whole base URL (a bare host
// gets /v1), except for providers whose reference base is a host (Ollama),
// where the version path is always appended.
func TestCustomHost(t *testing.T) {
	tests := []struct{ slug, host, want string }{
		{"openai", "", "https://api.openai.com/v1/chat/completions"},
		{"openai", "http://127.0.0.1:9000/v1", "http://127.0.0.1:9000/v1/chat/completions"},
		{"openai", "http://127.0.0.1:9000", "http://127.0.0.1:9000/v1/chat/completions"},
		{"groq", "https://proxy.example/groq/openai/v1", "https://proxy.example/groq/openai/v1/chat/completions"},
		{"ollama", "", "http://localhost:11434/v1/chat/completions"},
		{"ollama", "http://127.0.0.1:11434", "http://127.0.0.1:11434/v1/chat/completions"},
		{"ollama", "http://127.0.0.1:11434/", "http://127.0.0.1:11434/v1/chat/completions"},
		{"ollama", "https://proxy.example/ollama", "https://proxy.example/ollama/v1/chat/completions"},
	}
	for _, tt := range tests {
		p, ok := providers.Lookup(tt.slug)
		if !ok {
			t.Fatalf("%s not registered", tt.slug)
		}
		c := &providers.Call{Op: providers.OpChat, Method: http.MethodPost, Path: "/chat/completions", Body: []byte(`{"model":"m","messages":[]}`)}
		u := &providers.Upstream{Header: http.Header{}}
		if err := p.Prepare(c, &providers.Settings{Provider: tt.slug, APIKey: "k", CustomHost: tt.host}, u); err != nil {
			t.Fatalf("%s %q: %v", tt.slug, tt.host, err)
		}
		if got := u.URL.String(); got != tt.want {
			t.Errorf("%s custom_host %q: %s, want %s", tt.slug, tt.host, got, tt.want)
		}
	}
}
