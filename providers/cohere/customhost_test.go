package cohere

import (
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestCustomHostReplacesAPIHost: custom_host replaces the API host, as in
// the reference gateway; the versioned path is appended to it.
func TestCustomHostReplacesAPIHost(t *testing.T) {
	tests := []struct{ host, want string }{
		{"", BaseURL + "/v2/chat"},
		{"http://127.0.0.1:9000", "http://127.0.0.1:9000/v2/chat"},
		{"http://127.0.0.1:9000/", "http://127.0.0.1:9000/v2/chat"},
		{"https://proxy.example/cohere", "https://proxy.example/cohere/v2/chat"},
		{"https://proxy.example/v2", "https://proxy.example/v2/v2/chat"},
	}
	for _, tt := range tests {
		c := &providers.Call{Op: providers.OpChat, Method: http.MethodPost, Path: "/chat/completions", Model: "gemini-2.5-flash",
			Body: []byte(`{"model":"gemini-2.5-flash","messages":[{"role":"user","content":"hi"}]}`)}
		u := &providers.Upstream{Header: http.Header{}}
		if err := (provider{}).Prepare(c, &providers.Settings{APIKey: "k", CustomHost: tt.host}, u); err != nil {
			t.Fatalf("%q: %v", tt.host, err)
		}
		if got := u.URL.String(); got != tt.want {
			t.Errorf("custom_host %q: URL %s, want %s", tt.host, got, tt.want)
		}
	}
}
