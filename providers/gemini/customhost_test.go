package gemini

import (
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestCustomHostReplacesAPIHost: custom_host replaces the API host, as in
// the reference gateway; the versioned path is appended to it.
func TestCustomHostReplacesAPIHost(t *testing.T) {
	tests := []struct{ host, want string }{
		{"", BaseURL + "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"http://127.0.0.1:9000", "http://127.0.0.1:9000/v1beta/models/gemini-2.5-flash:generateContent"},
		{"http://127.0.0.1:9000/", "http://127.0.0.1:9000/v1beta/models/gemini-2.5-flash:generateContent"},
		{"https://proxy.example/gemini", "https://proxy.example/gemini/v1beta/models/gemini-2.5-flash:generateContent"},
		{"https://proxy.example/v1beta", "https://proxy.example/v1beta/v1beta/models/gemini-2.5-flash:generateContent"},
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
