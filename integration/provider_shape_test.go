package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestProviderWrongShapeIs502: a translated provider answering 200 with a
// body that is not its API's answer gets a 502 envelope, never an empty
// successful completion with zero usage.
func TestProviderWrongShapeIs502(t *testing.T) {
	var answer atomic.Value
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer.Load().(string))
	}))
	t.Cleanup(srv.Close)
	loadProviderSite(t)

	chatBody := []byte(`{"model":"%s","messages":[{"role":"user","content":"hi"}]}`)
	embedBody := []byte(`{"model":"%s","input":["hi"]}`)
	type target struct {
		name, path, model string
		body              []byte
		headers           []string
	}
	key := []string{"Authorization", "Bearer sk-test-provider", "x-gateway-custom-host", srv.URL}
	targets := []target{
		{"anthropic chat", "/chat/completions", "claude-sonnet-4", chatBody, []string{"x-gateway-provider", "anthropic"}},
		{"google chat", "/chat/completions", "gemini-2.5-flash", chatBody, []string{"x-gateway-provider", "google"}},
		{"google embeddings", "/embeddings", "text-embedding-004", embedBody, []string{"x-gateway-provider", "google"}},
		{"vertex gemini chat", "/chat/completions", "gemini-2.5-flash", chatBody, []string{"x-gateway-provider", "vertex-ai", "x-gateway-cloudc-project-id", "p"}},
		{"vertex claude chat", "/chat/completions", "anthropic/claude-sonnet-4", chatBody, []string{"x-gateway-provider", "vertex-ai", "x-gateway-cloudc-project-id", "p"}},
		{"vertex embeddings", "/embeddings", "text-embedding-005", embedBody, []string{"x-gateway-provider", "vertex-ai", "x-gateway-cloudc-project-id", "p"}},
		{"cohere chat", "/chat/completions", "command-r", chatBody, []string{"x-gateway-provider", "cohere"}},
		{"cohere embeddings", "/embeddings", "embed-v4.0", embedBody, []string{"x-gateway-provider", "cohere"}},
		{"bedrock chat", "/chat/completions", "anthropic.claude-3-haiku", chatBody, []string{"x-gateway-provider", "bedrock", "x-gateway-clouda-access-key-id", "AKIATEST", "x-gateway-clouda-secret-access-key", "secret"}},
		{"bedrock embeddings", "/embeddings", "amazon.titan-embed-text-v2:0", embedBody, []string{"x-gateway-provider", "bedrock", "x-gateway-clouda-access-key-id", "AKIATEST", "x-gateway-clouda-secret-access-key", "secret"}},
	}
	for _, tg := range targets {
		for _, bad := range []string{`{}`, `{"foo":1}`} {
			t.Run(tg.name+" "+bad, func(t *testing.T) {
				answer.Store(bad)
				before := hits.Load()
				body := []byte(fmt.Sprintf(string(tg.body), tg.model))
				resp, raw := do(t, "POST", tg.path, body, append(append([]string{}, tg.headers...), key...)...)
				if hits.Load() == before {
					t.Fatalf("the provider was not called (%d): %s", resp.StatusCode, raw)
				}
				assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, http.StatusBadGateway, "")
				var env map[string]json.RawMessage
				_ = json.Unmarshal(raw, &env)
				if _, ok := env["choices"]; ok {
					t.Fatalf("a completion came back: %s", raw)
				}
			})
		}
	}
}
