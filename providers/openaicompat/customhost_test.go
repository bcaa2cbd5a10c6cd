package openaicompat

import (
	"errors"
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
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

// TestCustomHostScheme: a custom_host that is not an http or https URL is
// a 400 on custom_host for every row, the host-path rows (Ollama)
// included.
func TestCustomHostScheme(t *testing.T) {
	for _, tt := range []struct{ slug, host string }{
		{"openai", "ftp://x"},
		{"openai-compatible", "not a url"},
		{"ollama", "ftp://gpu:11434"},
		{"ollama", "gpu:11434"},
	} {
		p, _ := providers.Lookup(tt.slug)
		c := &providers.Call{Op: providers.OpChat, Method: http.MethodPost, Path: "/chat/completions", Body: []byte(`{}`)}
		err := p.Prepare(c, &providers.Settings{Provider: tt.slug, APIKey: "k", CustomHost: tt.host}, &providers.Upstream{Header: http.Header{}})
		var ae *apierror.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Param != "custom_host" {
			t.Errorf("%s custom_host %q: %v, want a 400 on custom_host", tt.slug, tt.host, err)
		}
	}
}
