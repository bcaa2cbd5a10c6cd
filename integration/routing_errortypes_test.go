package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

const (
	openAIContextTooLong = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	openAIRateLimited    = `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM): Limit 30000, Used 29120, Requested 2210. Please try again in 2.66s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
)

// lastEntry returns the newest gateway log entry, decoded.
func lastEntry(t testing.TB) map[string]any {
	t.Helper()
	lines := gatewayLogLines(t)
	if len(lines) == 0 {
		t.Fatal("no log entry")
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestFallbackOnErrorTypes: on_error_types moves on from a target that
// answered OpenAI's context-length error to the next, while a rate-limit
// error does not trigger it: that answer is the client's, its class in
// x-gateway-error-type and in the log's error_type.
func TestFallbackOnErrorTypes(t *testing.T) {
	a, b := newScripted(t, reply{status: 400, body: openAIContextTooLong}), newScripted(t)
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"fallback","on_error_types":["context_length_exceeded"]},"targets":[` +
		target(a.fakeOpenAI, "") + `,` + target(b.fakeOpenAI, "") + `]}`

	resp, raw := chat(t, cfg)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	wantHeaders(t, resp, "x-gateway-last-used-option-index", "config.targets[1]", "x-gateway-error-type", "")
	if got := lastAttempts(t); got != "config.targets[0]:fallback:400 config.targets[1]:ok:200" {
		t.Fatalf("attempts %s", got)
	}

	a.set(reply{status: 429, body: openAIRateLimited})
	resp, raw = chat(t, cfg)
	if resp.StatusCode != 429 || !strings.Contains(string(raw), "Rate limit reached") {
		t.Fatalf("the rate limit is the answer: %d %s", resp.StatusCode, raw)
	}
	wantHeaders(t, resp, "x-gateway-last-used-option-index", "config.targets[0]", "x-gateway-error-type", "rate_limited")
	if b.count() != 1 {
		t.Fatalf("a rate limit must not fall back: b saw %d requests", b.count())
	}
	if got := lastAttempts(t); got != "config.targets[0]:error:429" {
		t.Fatalf("attempts %s", got)
	}
	if e := lastEntry(t); e["error_type"] != "rate_limited" {
		t.Fatalf("log error_type %v", e["error_type"])
	}

	// Under the alias prefix the class comes under both names.
	a.set(reply{status: 400, body: openAIContextTooLong})
	resp, _ = do(t, "POST", "/chat/completions", []byte(chatBody), "x-portkey-config", compactJSON(t, `{"provider":"openai","api_key":"sk-test-provider","custom_host":"`+a.URL+`"}`))
	wantHeaders(t, resp, "x-gateway-error-type", "context_length_exceeded", "x-portkey-error-type", "context_length_exceeded")
	if e := lastEntry(t); e["error_type"] != "context_length_exceeded" {
		t.Fatalf("log error_type %v", e["error_type"])
	}

	resp, raw = chat(t, strings.Replace(cfg, `"context_length_exceeded"]`, `"context_too_long"]`, 1))
	assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 400, "invalid_request_error")
	if !strings.Contains(string(raw), `config.strategy.on_error_types[0]`) || !strings.Contains(string(raw), `but found \"context_too_long\"`) {
		t.Fatalf("the 400 must name the field and the unknown type: %s", raw)
	}
}

// TestErrorTypesEveryProvider sends a chat completion to each provider
// family's fake answering one of its recorded context-length and
// content-policy bodies, and reads the class the gateway gives the client.
func TestErrorTypesEveryProvider(t *testing.T) {
	type answer struct {
		status int
		header string // x-amzn-ErrorType, for Bedrock
		body   []byte
	}
	var current atomic.Pointer[answer]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		a := current.Load()
		if a.header != "" {
			w.Header().Set("X-Amzn-ErrorType", a.header)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	}))
	t.Cleanup(srv.Close)
	loadProviderSite(t)

	targets := map[string]string{
		"openai":    `"provider":"openai","api_key":"sk-test-provider"`,
		"vllm":      `"provider":"openai-compatible"`,
		"azure":     `"provider":"azure-openai","api_key":"sk-test-provider","resource_name":"contoso","api_version":"v1"`,
		"anthropic": `"provider":"anthropic","api_key":"sk-test-provider"`,
		"bedrock":   `"provider":"bedrock","clouda_access_key_id":"AKIATEST","clouda_secret_access_key":"secret","clouda_region":"us-east-1"`,
		"google":    `"provider":"google","api_key":"sk-test-provider"`,
		"vertex":    `"provider":"vertex-ai","api_key":"ya29.token","cloudc_project_id":"p","cloudc_region":"us-central1"`,
		"cohere":    `"provider":"cohere","api_key":"sk-test-provider"`,
	}
	tests := []struct {
		target, model, pkg, file, header string
		status                           int
		want                             string
	}{
		{"openai", "gpt-4o", "openaicompat", "openai_context_length.json", "", 400, "context_length_exceeded"},
		{"openai", "gpt-4o", "openaicompat", "openai_content_policy.json", "", 400, "content_policy"},
		{"vllm", "m", "openaicompat", "vllm_context_length.json", "", 400, "context_length_exceeded"},
		{"vllm", "m", "openaicompat", "sglang_context_length.json", "", 400, "context_length_exceeded"},
		{"vllm", "m", "openaicompat", "llamacpp_context_size.json", "", 400, "context_length_exceeded"},
		{"azure", "gpt-4o", "azure", "context_length.json", "", 400, "context_length_exceeded"},
		{"azure", "gpt-4o", "azure", "content_filter.json", "", 400, "content_policy"},
		{"anthropic", "claude-sonnet-4", "anthropic", "prompt_too_long.json", "", 400, "context_length_exceeded"},
		{"anthropic", "claude-sonnet-4", "anthropic", "content_filtering.json", "", 400, "content_policy"},
		{"bedrock", "anthropic.claude-3-haiku", "bedrock", "converse_input_too_long.json", "ValidationException", 400, "context_length_exceeded"},
		{"bedrock", "anthropic.claude-3-haiku", "bedrock", "content_filters.json", "ValidationException", 400, "content_policy"},
		{"google", "gemini-2.5-flash", "gemini", "input_token_count.json", "", 400, "context_length_exceeded"},
		{"vertex", "gemini-2.5-flash", "vertex", "gemini_input_token_count.json", "", 400, "context_length_exceeded"},
		{"vertex", "anthropic/claude-sonnet-4", "vertex", "claude_prompt_too_long.json", "", 400, "context_length_exceeded"},
		{"vertex", "anthropic/claude-sonnet-4", "vertex", "claude_content_filtering.json", "", 400, "content_policy"},
		{"cohere", "command-r", "cohere", "too_many_tokens.json", "", 400, "context_length_exceeded"},
		{"cohere", "command-r", "cohere", "blocked_output.json", "", 400, "content_policy"},
		{"openai", "gpt-4o", "openaicompat", "openai_insufficient_quota.json", "", 429, "quota_exhausted"},
		{"anthropic", "claude-sonnet-4", "anthropic", "../error_overloaded.json", "", 529, "overloaded"},
		{"openai", "gpt-4o", "openaicompat", "openai_invalid_api_key.json", "", 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.target+"/"+tt.file, func(t *testing.T) {
			current.Store(&answer{status: tt.status, header: tt.header, body: fixture(t, tt.pkg, "errors/"+tt.file)})
			cfg := fmt.Sprintf(`{%s,"custom_host":%q}`, targets[tt.target], srv.URL)
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, tt.model)
			resp, raw := translatedDo(t, "POST", "/chat/completions", []byte(body), "x-gateway-config", cfg)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, raw)
			}
			if got := resp.Header.Get("x-gateway-error-type"); got != tt.want {
				t.Fatalf("x-gateway-error-type %q, want %q (%s)", got, tt.want, raw)
			}
		})
	}
}
