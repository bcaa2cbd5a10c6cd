package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// usageHook answers chat completions with a fixed usage holding cached
// and reasoning tokens, for the model the client asked.
func usageHook(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.URL.Path != "/v1/chat/completions" || strings.Contains(string(body), `"stream":true`) {
		return false
	}
	model := strings.Split(strings.SplitN(string(body), `"model":"`, 2)[1], `"`)[0]
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":800},"completion_tokens_details":{"reasoning_tokens":400}}}`, model)
	return true
}

// TestCostPerRequest checks the cost of non-stream answers in the
// x-gateway-cost header (and x-portkey-cost under that prefix) and in the
// log line: a known model with cached and reasoning tokens, an unknown
// model (no header, cost_unknown in the log, never 0), and a model priced
// by the operator's price_catalog file, which a reload re-reads.
func TestCostPerRequest(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = usageHook
	file := filepath.Join(t.TempDir(), "prices.json")
	write := func(in, out, reasoning string) {
		t.Helper()
		data := `{"house-model":{"litellm_provider":"openai","mode":"chat","input_cost_per_token":` + in +
			`,"output_cost_per_token":` + out + `,"output_cost_per_reasoning_token":` + reasoning + `}}`
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1e-06", "2e-06", "5e-06")
	load := func() { loadSite(t, site{LLM: "price_catalog " + file}) }
	load()
	chat := func(model, prefix string) (*http.Response, string) {
		t.Helper()
		resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"`+model+`","messages":[]}`),
			prefix+"provider", "openai", prefix+"custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, raw)
		}
		return resp, string(raw)
	}

	tests := []struct {
		name, model, prefix string
		// want is the header value; "" means no header (unknown cost).
		want, wantLog string
	}{
		// o4-mini: 200 uncached × 1.1e-6 + 800 cached × 2.75e-7 + 500
		// output (reasoning at the output price) × 4.4e-6.
		{"known model, cached and reasoning tokens", "o4-mini", "x-gateway-", "0.00264", `"cost_usd":0.00264`},
		{"alias prefix", "o4-mini", "x-portkey-", "0.00264", `"cost_usd":0.00264`},
		{"unknown model", "gpt-9-imaginary", "x-gateway-", "", `"cost_unknown":true`},
		// house-model from the file: 1000 × 1e-6 (no cached price) + 100
		// output × 2e-6 + 400 reasoning × 5e-6.
		{"override file", "house-model", "x-gateway-", "0.0032", `"cost_usd":0.0032`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			truncateLog()
			resp, _ := chat(tt.model, tt.prefix)
			if got := resp.Header.Get("X-Gateway-Cost"); got != tt.want {
				t.Errorf("x-gateway-cost = %q, want %q", got, tt.want)
			}
			wantAlias := ""
			if tt.prefix == "x-portkey-" {
				wantAlias = tt.want
			}
			if got := resp.Header.Get("X-Portkey-Cost"); got != wantAlias {
				t.Errorf("x-portkey-cost = %q, want %q", got, wantAlias)
			}
			lines := gatewayLogLines(t)
			if len(lines) != 1 || !strings.Contains(lines[0], tt.wantLog) {
				t.Fatalf("log lines %v lack %s", lines, tt.wantLog)
			}
			if tt.want == "" && strings.Contains(lines[0], `"cost_usd"`) {
				t.Errorf("unknown cost logged as a number: %s", lines[0])
			}
		})
	}

	// A reload re-reads the file.
	write("2e-06", "2e-06", "5e-06")
	load()
	if resp, _ := chat("house-model", "x-gateway-"); resp.Header.Get("X-Gateway-Cost") != "0.0042" {
		t.Fatalf("after reload x-gateway-cost = %q, want 0.0042", resp.Header.Get("X-Gateway-Cost"))
	}

	// A stream carries no cost header, but its log line has the cost.
	truncateLog()
	resp, _ := do(t, "POST", "/chat/completions", []byte(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if resp.Header.Get("X-Gateway-Cost") != "" {
		t.Errorf("stream has x-gateway-cost %q", resp.Header.Get("X-Gateway-Cost"))
	}
	// 9 × 1.5e-7 + 3 × 6e-7
	if lines := gatewayLogLines(t); len(lines) != 1 || !strings.Contains(lines[0], `"cost_usd":0.00000315`) && !strings.Contains(lines[0], `"cost_usd":3.15e-06`) {
		t.Errorf("stream log lines %v lack the cost", lines)
	}
}

// TestCostCatalogFileErrors: a missing or malformed price_catalog fails
// the load, naming the option.
func TestCostCatalogFileErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`{"m":{"input_cost_per_token":"x"}}`), 0o600)
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.json"), bad} {
		err := tryLoad(site{LLM: "price_catalog " + path})
		if err == nil || !strings.Contains(err.Error(), "price_catalog") {
			t.Errorf("%s: load error %v", path, err)
		}
	}
	loadSite(t, site{})
}
