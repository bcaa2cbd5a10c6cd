package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

// TestErrorClassInAnswer: a provider's classified error reaches the
// client with its class in the body, where an SDK's error object shows
// it: OpenAI's envelope carries error.error_type, and error.code is the
// class when the provider sent no code (otherwise the provider's code is
// kept); Anthropic's envelope (the Messages API) carries
// error.error_type. Each provider family answers one of its recorded
// bodies; the official openai-go and anthropic-sdk-go clients read them.
func TestErrorClassInAnswer(t *testing.T) {
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
		class                            string
		// code is error.code as openai-go reads it: the provider's own
		// when it sent one, else the class.
		code string
	}{
		{"openai", "gpt-4o", "openaicompat", "openai_context_length.json", "", 400, "context_length_exceeded", "context_length_exceeded"},
		{"openai", "gpt-4o", "openaicompat", "openai_content_policy.json", "", 400, "content_policy", "content_policy_violation"},
		{"openai", "gpt-4o", "openaicompat", "openai_overloaded.json", "", 503, "overloaded", "overloaded"},
		{"azure", "gpt-4o", "azure", "content_filter.json", "", 400, "content_policy", "content_filter"},
		{"azure", "gpt-4o", "azure", "context_length.json", "", 400, "context_length_exceeded", "context_length_exceeded"},
		{"anthropic", "claude-sonnet-4", "anthropic", "prompt_too_long.json", "", 400, "context_length_exceeded", "context_length_exceeded"},
		{"anthropic", "claude-sonnet-4", "anthropic", "content_filtering.json", "", 400, "content_policy", "content_policy"},
		{"bedrock", "anthropic.claude-3-haiku", "bedrock", "converse_input_too_long.json", "ValidationException", 400, "context_length_exceeded", "context_length_exceeded"},
		{"bedrock", "anthropic.claude-3-haiku", "bedrock", "throttling.json", "ThrottlingException", 429, "rate_limited", "rate_limited"},
		{"google", "gemini-2.5-flash", "gemini", "input_token_count.json", "", 400, "context_length_exceeded", "INVALID_ARGUMENT"},
		{"vertex", "gemini-2.5-flash", "vertex", "gemini_input_token_count.json", "", 400, "context_length_exceeded", "INVALID_ARGUMENT"},
		{"vertex", "anthropic/claude-sonnet-4", "vertex", "claude_content_filtering.json", "", 400, "content_policy", "content_policy"},
		{"cohere", "command-r", "cohere", "too_many_tokens.json", "", 400, "context_length_exceeded", "context_length_exceeded"},
		// vLLM's and SGLang's flat {"object":"error",…} becomes the
		// envelope; their numeric code is theirs.
		{"vllm", "m", "openaicompat", "vllm_context_length.json", "", 400, "context_length_exceeded", "400"},
		{"vllm", "m", "openaicompat", "vllm_context_length_flat.json", "", 400, "context_length_exceeded", "400"},
		{"vllm", "m", "openaicompat", "mistral_context_length.json", "", 400, "context_length_exceeded", "context_length_exceeded"},
		{"vllm", "m", "openaicompat", "llamacpp_loading.json", "", 503, "overloaded", "503"},
	}
	for _, tt := range tests {
		t.Run(tt.target+"/"+tt.file, func(t *testing.T) {
			current.Store(&answer{status: tt.status, header: tt.header, body: fixture(t, tt.pkg, "errors/"+tt.file)})
			cfg := fmt.Sprintf(`{%s,"custom_host":%q}`, targets[tt.target], srv.URL)

			client := translatedClient("x-gateway-config", cfg)
			_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    tt.model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var oe *openai.Error
			if !errors.As(err, &oe) {
				t.Fatalf("openai-go: want an API error, got %v", err)
			}
			if oe.StatusCode != tt.status {
				t.Fatalf("openai-go: status %d, want %d: %s", oe.StatusCode, tt.status, oe.RawJSON())
			}
			if got := gjson.Get(oe.RawJSON(), "error_type").String(); got != tt.class {
				t.Fatalf("openai-go: error.error_type %q, want %q: %s", got, tt.class, oe.RawJSON())
			}
			if got := gjson.Get(oe.RawJSON(), "code").String(); got != tt.code {
				t.Fatalf("openai-go: error.code %q, want %q: %s", got, tt.code, oe.RawJSON())
			}
			if oe.Message == "" {
				t.Fatalf("openai-go: the message is lost: %s", oe.RawJSON())
			}
			if got := oe.Response.Header.Get("x-gateway-error-type"); got != tt.class {
				t.Fatalf("x-gateway-error-type %q, want %q", got, tt.class)
			}

			mc := messagesClient("x-gateway-config", cfg)
			_, err = mc.Messages.New(context.Background(), anthropic.MessageNewParams{
				Model:     anthropic.Model(tt.model),
				MaxTokens: 16,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			var ae *anthropic.Error
			if !errors.As(err, &ae) {
				t.Fatalf("anthropic-sdk-go: want an API error, got %v", err)
			}
			if ae.StatusCode != tt.status {
				t.Fatalf("anthropic-sdk-go: status %d, want %d: %s", ae.StatusCode, tt.status, ae.RawJSON())
			}
			if got := gjson.Get(ae.RawJSON(), "error.error_type").String(); got != tt.class {
				t.Fatalf("anthropic-sdk-go: error.error_type %q, want %q: %s", got, tt.class, ae.RawJSON())
			}
			if ae.Type() == "" || ae.Message == "" {
				t.Fatalf("anthropic-sdk-go: type %q message %q: %s", ae.Type(), ae.Message, ae.RawJSON())
			}
		})
	}

	// An error of no class (a bad key) is the provider's as it was.
	t.Run("no class", func(t *testing.T) {
		body := fixture(t, "openaicompat", "errors/openai_invalid_api_key.json")
		current.Store(&answer{status: 401, body: body})
		cfg := fmt.Sprintf(`{%s,"custom_host":%q}`, targets["openai"], srv.URL)
		resp, raw := translatedDo(t, "POST", "/chat/completions", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`), "x-gateway-config", cfg)
		if resp.StatusCode != 401 || string(raw) != string(body) {
			t.Fatalf("status %d body %s, want the provider's", resp.StatusCode, raw)
		}
	})
}
