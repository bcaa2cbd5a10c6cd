package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func TestResponseGolden(t *testing.T) {
	cases := []struct {
		name  string
		usage providers.Usage
	}{
		{"response_text", providers.Usage{PromptTokens: 2095, CompletionTokens: 503, TotalTokens: 2598}},
		{"response_tools", providers.Usage{PromptTokens: 1320, CompletionTokens: 90, TotalTokens: 1410, CachedTokens: 1000, CacheWriteTokens: 20}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &providers.Call{Op: providers.OpChat, Model: "claude"}
			got, u, err := Chat{Provider: Slug}.Response(c, goldentest.Read(t, "testdata/"+tc.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			goldentest.JSON(t, got, "testdata/"+tc.name+".openai.json")
			if *u != tc.usage {
				t.Fatalf("usage = %+v, want %+v", *u, tc.usage)
			}
		})
	}
}

func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
		"tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop",
		"model_context_window_exceeded": "length", "": "stop",
	} {
		if got := FinishReason(in); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResponseInvalid(t *testing.T) {
	if _, _, err := (Chat{}).Response(&providers.Call{}, []byte("<html>")); err == nil {
		t.Fatal("want an error for a non-JSON body")
	}
}

func TestError(t *testing.T) {
	cases := []struct {
		name, body     string
		status         int
		msg, typ, code string
	}{
		{"anthropic", `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}`, 400, "max_tokens: field required", "invalid_request_error", ""},
		{"overloaded", string(goldentest.Read(t, "testdata/error_overloaded.json")), 529, "Overloaded", "overloaded_error", ""},
		{"google envelope", `[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}]`, 429, "Quota exceeded", "rate_limit_exceeded", "RESOURCE_EXHAUSTED"},
		{"html", `<html>bad gateway</html>`, 502, "anthropic returned HTTP 502: <html>bad gateway</html>", "server_error", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var env struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    any    `json:"code"`
					Param   any    `json:"param"`
				} `json:"error"`
			}
			out := Chat{Provider: Slug}.Error(&providers.Call{}, tc.status, []byte(tc.body))
			if err := json.Unmarshal(out, &env); err != nil {
				t.Fatal(err)
			}
			code, _ := env.Error.Code.(string)
			if env.Error.Message != tc.msg || env.Error.Type != tc.typ || code != tc.code {
				t.Fatalf("got %s", out)
			}
		})
	}
}
