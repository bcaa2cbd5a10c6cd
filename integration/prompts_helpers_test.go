package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	// The prompt API registers its control-plane routes when imported.
	// module.go should import it too, so built binaries serve it.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/prompts/promptapi"
)

// promptSite is a test gateway with a prompt files directory and its own
// Caddy storage, so prompts created through the API by one test (or an
// earlier run) never show up in another.
type promptSite struct {
	site
	PromptDir string
	Storage   string
}

func newPromptSite(t *testing.T, llm string) *promptSite {
	t.Helper()
	s := &promptSite{PromptDir: t.TempDir(), Storage: t.TempDir()}
	s.LLM = llm
	return s
}

func (s *promptSite) caddyfile() string {
	s2 := s.site
	s2.LLM = "prompts " + s.PromptDir + "\n" + s.LLM
	cf := s2.caddyfile()
	return strings.Replace(cf, "persist_config off", "persist_config off\n\tstorage file_system "+s.Storage, 1)
}

func (s *promptSite) tryLoad() error {
	newHTTPPort()
	cfg, err := adapt(s.caddyfile())
	if err != nil {
		return err
	}
	truncateLog()
	err = caddy.Load(cfg, true)
	// The old server closes its idle connections as the new config takes
	// over; a POST that picked one of them would fail with EOF and, not
	// being idempotent, not be retried.
	http.DefaultClient.CloseIdleConnections()
	return err
}

func (s *promptSite) load(t *testing.T) {
	t.Helper()
	if err := s.tryLoad(); err != nil {
		t.Fatalf("loading Caddyfile: %v\n%s", err, s.caddyfile())
	}
}

// writePrompt writes a prompt file into the site's prompt directory.
func (s *promptSite) writePrompt(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.PromptDir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// call sends a request with the gateway key and decodes a JSON answer
// into out (when not nil), failing unless the status is want.
func call(t *testing.T, method, path, body string, want int, out any, headers ...string) []byte {
	t.Helper()
	resp, raw := doRetry(t, method, path, body, headers...)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if want >= 400 && resp.Header.Get("x-gateway-error") != "true" {
		t.Fatalf("%s %s: gateway errors carry x-gateway-error: true", method, path)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: content type %q", method, path, ct)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return raw
}

// doRetry is do, retrying a request that failed before any answer. Right
// after a config load the old server may still accept a connection on the
// shared listener and then close it unanswered; such a request was never
// handled, so sending it again is safe even for a POST.
func doRetry(t *testing.T, method, path, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		req, err := http.NewRequest(method, gatewayURL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-gateway-api-key", gatewayKey)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			lastErr = err
			http.DefaultClient.CloseIdleConnections()
			continue
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s %s: reading the answer: %v", method, path, err)
		}
		return resp, raw
	}
	t.Fatalf("%s %s: %v", method, path, lastErr)
	return nil, nil
}

// apiError is the OpenAI error envelope.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   string `json:"param"`
		Code    string `json:"code"`
	} `json:"error"`
}

// callErr expects an error status and returns the envelope.
func callErr(t *testing.T, method, path, body string, want int, headers ...string) apiError {
	t.Helper()
	var e apiError
	call(t, method, path, body, want, &e, headers...)
	if e.Error.Message == "" {
		t.Fatalf("%s %s: empty error message", method, path)
	}
	return e
}

// rendered is the answer of the render route.
type rendered struct {
	Success bool `json:"success"`
	Data    struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Model       string   `json:"model"`
		Temperature *float64 `json:"temperature"`
		MaxTokens   *int     `json:"max_tokens"`
		Stream      *bool    `json:"stream"`
	} `json:"data"`
}
