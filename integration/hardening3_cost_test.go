package integration

import (
	"net/http"
	"strings"
	"testing"
)

// cacheWriteUsage is an Anthropic usage with a prompt cache write: 30
// plain input tokens, 1,000 written to the cache, 100 read from it.
const cacheWriteUsage = `{"input_tokens":30,"cache_creation_input_tokens":1000,"cache_read_input_tokens":100,"output_tokens":12}`

// TestCostAnthropicCacheWriteAndAlias (issue 21, cost fidelity): an
// Anthropic answer that repeats the model alias "claude-sonnet-4-5" and
// reports cache_creation_input_tokens is priced, with the cache writes at
// the cache-write rate and the cache reads at the cache-read rate, in the
// x-gateway-cost header and the log line (which also carries the
// cache-write count), for whole answers and streams. Before the fix the
// alias had no price (no header, cost_unknown) and cache writes, had the
// model been priced, cost the plain input price.
func TestCostAnthropicCacheWriteAndAlias(t *testing.T) {
	reply := []byte(`{"id":"msg_cw","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":` + cacheWriteUsage + `}`)
	transcript := []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_cw\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":" + strings.Replace(cacheWriteUsage, `"output_tokens":12`, `"output_tokens":1`, 1) + "}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":12}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	up := fakeAnthropic(t, reply, transcript)
	loadProviderSite(t)

	// claude-sonnet-4-5 (genai-prices): $3 input, $0.30 cache read, $3.75
	// cache write, $15 output per million tokens:
	// 30×3e-6 + 100×3e-7 + 1000×3.75e-6 + 12×1.5e-5 = 0.00405.
	// At the plain input price the cache writes would make it 0.00105.
	const want = "0.00405"
	tests := []struct {
		name   string
		body   string
		header string // "" for streams, which carry no cost header
	}{
		{"whole answer", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, want},
		{"stream", `{"model":"claude-sonnet-4-5","max_tokens":50,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			truncateLog()
			resp, body := translatedDo(t, http.MethodPost, "/chat/completions", []byte(tt.body),
				"x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL, "Authorization", "Bearer "+anthropicKey)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("X-Gateway-Cost"); got != tt.header {
				t.Errorf("x-gateway-cost = %q, want %q", got, tt.header)
			}
			lines := gatewayLogLines(t)
			if len(lines) != 1 {
				t.Fatalf("log lines: %v", lines)
			}
			for _, s := range []string{`"cost_usd":` + want, `"cache_write_tokens":1000`, `"cached_tokens":100`, `"prompt_tokens":1130`} {
				if !strings.Contains(lines[0], s) {
					t.Errorf("log line lacks %s: %s", s, lines[0])
				}
			}
		})
	}
}
