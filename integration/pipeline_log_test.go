package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPipelineOneLogLinePerRequest: each request is logged exactly once.
// When the site has an access log, the gateway's fields join Caddy's
// entry as an "llm" object (and log_append and header can use the
// {http.llm.*} placeholders); when it has none, the gateway writes its
// own "llm request" entry.
func TestPipelineOneLogLinePerRequest(t *testing.T) {
	up := newFakeOpenAI(t)
	access := filepath.Join(t.TempDir(), "access.log")
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider", "x-gateway-trace-id", ""}
	tests := []struct {
		name   string
		before string
		logged bool
	}{
		{"site logs", `log {
		output file ` + access + `
		format json
	}
	log_append llm_total_tokens {http.llm.tokens.total}
	log_append llm_key {http.llm.key_name}
	header >X-Llm-Provider {http.llm.provider}
	header >X-Llm-Model {http.llm.model}
	header >X-Llm-Trace {http.llm.trace_id}
	header >X-Llm-Cache {http.llm.cache_status}
	header >X-Llm-Index {http.llm.last_used_option_index}`, true},
		{"site does not log", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = os.WriteFile(access, nil, 0o600)
			loadSite(t, site{Before: tt.before})
			resp, raw := do(t, "POST", "/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), hdr...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d %s", resp.StatusCode, raw)
			}
			trace := resp.Header.Get("x-gateway-trace-id")
			own := 0
			for _, l := range gatewayLogLines(t) {
				if strings.Contains(l, trace) {
					own++
				}
			}
			accLines := 0
			b, _ := os.ReadFile(access)
			var entry map[string]any
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, trace) {
					accLines++
					_ = json.Unmarshal([]byte(l), &entry)
				}
			}
			if !tt.logged {
				if own != 1 || accLines != 0 {
					t.Fatalf("want one gateway entry, got %d gateway and %d access lines", own, accLines)
				}
				return
			}
			if own != 0 || accLines != 1 {
				t.Fatalf("want one access log line, got %d gateway and %d access lines", own, accLines)
			}
			llm, _ := entry["llm"].(map[string]any)
			if llm["trace_id"] != trace || llm["provider"] != "openai" || llm["model"] != "gpt-4o-mini" || llm["api_key_name"] != "test" {
				t.Fatalf("llm fields: %v", llm)
			}
			if u, _ := llm["usage"].(map[string]any); u == nil || u["total_tokens"] == nil {
				t.Fatalf("usage missing: %v", llm)
			}
			tot := entry["llm_total_tokens"]
			if tot == nil || tot == "" || tot == "0" || entry["llm_key"] != "test" {
				t.Fatalf("log_append placeholders: tokens %v key %v", tot, entry["llm_key"])
			}
			want := map[string]string{"X-Llm-Provider": "openai", "X-Llm-Model": "gpt-4o-mini", "X-Llm-Trace": trace, "X-Llm-Cache": "DISABLED", "X-Llm-Index": "config"}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}
