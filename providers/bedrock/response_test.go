package bedrock

import (
	"encoding/json"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestChatResponseGolden(t *testing.T) {
	fixedIDs(t)
	c := &providers.Call{Op: providers.OpChat, Model: "anthropic.claude-3-7-sonnet-20250219-v1:0"}
	got, usage, err := chatTranslator{}.Response(c, readTestdata(t, "converse_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := readTestdata(t, "chat_response.json"); !jsonEqual(t, got, want) {
		t.Fatalf("chat response differs\n got: %s\nwant: %s", got, want)
	}
	want := providers.Usage{PromptTokens: 220, CompletionTokens: 45, TotalTokens: 265, CachedTokens: 100}
	if usage == nil || *usage != want {
		t.Fatalf("usage = %+v, want %+v", usage, want)
	}
}

func TestChatResponse(t *testing.T) {
	fixedIDs(t)
	tests := []struct {
		name        string
		in          string
		wantContent any // string, or nil for a JSON null
		wantFinish  string
		wantUsage   *providers.Usage
	}{
		{
			name:        "text",
			in:          `{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}`,
			wantContent: "Hi", wantFinish: "stop",
			wantUsage: &providers.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4},
		},
		{
			name:        "tool only has null content",
			in:          `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"a","name":"f","input":{}}}]}},"stopReason":"tool_use"}`,
			wantContent: nil, wantFinish: "tool_calls",
		},
		{
			name:        "empty content is an empty string",
			in:          `{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"guardrail_intervened"}`,
			wantContent: "", wantFinish: "content_filter",
		},
		{
			name:        "missing totalTokens is summed",
			in:          `{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"max_tokens","usage":{"inputTokens":5,"outputTokens":7,"cacheWriteInputTokens":2}}`,
			wantContent: "x", wantFinish: "length",
			wantUsage: &providers.Usage{PromptTokens: 7, CompletionTokens: 7, TotalTokens: 14, CacheWriteTokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, usage, err := chatTranslator{}.Response(&providers.Call{Model: "m"}, []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Object  string `json:"object"`
				Choices []struct {
					Message struct {
						Content any `json:"content"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if got.Object != "chat.completion" || len(got.Choices) != 1 {
				t.Fatalf("bad shape: %s", out)
			}
			if got.Choices[0].Message.Content != tt.wantContent || got.Choices[0].FinishReason != tt.wantFinish {
				t.Fatalf("content=%#v finish=%q; want %#v %q", got.Choices[0].Message.Content, got.Choices[0].FinishReason, tt.wantContent, tt.wantFinish)
			}
			if (usage == nil) != (tt.wantUsage == nil) || usage != nil && *usage != *tt.wantUsage {
				t.Fatalf("usage = %+v, want %+v", usage, tt.wantUsage)
			}
		})
	}
}

func TestChatResponseInvalid(t *testing.T) {
	for _, in := range []string{`not json`, `{"output":{}}`, `{"output":{"message":{"content":"x"}}}`} {
		if _, _, err := (chatTranslator{}).Response(&providers.Call{}, []byte(in)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"guardrail_intervened": "content_filter", "content_filtered": "content_filter",
		"model_context_window_exceeded": "length", "malformed_model_output": "stop", "": "stop",
	} {
		if got := FinishReason(in); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		wantMsg  string
		wantType string
		wantCode any
	}{
		{"validation", 400, `{"message":"Malformed input request: extraneous key [foo] is not permitted"}`,
			"Malformed input request: extraneous key [foo] is not permitted", "invalid_request_error", nil},
		{"throttling by status", 429, `{"message":"Too many requests, please wait before trying again."}`,
			"Too many requests, please wait before trying again.", "rate_limit_exceeded", nil},
		{"access denied", 403, `{"Message":"User: arn:aws:iam::1:user/x is not authorized"}`,
			"User: arn:aws:iam::1:user/x is not authorized", "authentication_error", nil},
		{"typed body", 400, `{"__type":"com.amazon.coral.service#ThrottlingException:http://internal","message":"slow down"}`,
			"slow down", "rate_limit_exceeded", "ThrottlingException"},
		{"not found", 404, `{"message":"The provided model identifier is invalid."}`,
			"The provided model identifier is invalid.", "not_found_error", nil},
		{"model error 424", 424, `{"message":"Model failed"}`, "Model failed", "upstream_error", nil},
		{"plain text 503", 503, `Service Unavailable`, "Service Unavailable", "service_unavailable", nil},
		{"empty 500", 500, ``, "bedrock returned Internal Server Error", "server_error", nil},
		{"json without message", 500, `{}`, "bedrock returned Internal Server Error", "server_error", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var env struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Param   any    `json:"param"`
					Code    any    `json:"code"`
				} `json:"error"`
			}
			out := chatTranslator{}.Error(nil, tt.status, []byte(tt.body))
			if err := json.Unmarshal(out, &env); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if env.Error.Message != tt.wantMsg || env.Error.Type != tt.wantType || env.Error.Code != tt.wantCode {
				t.Fatalf("got %+v", env.Error)
			}
		})
	}
}

func BenchmarkBedrockResponse(b *testing.B) {
	body := readTestdata(b, "converse_response.json")
	c := &providers.Call{Op: providers.OpChat, Model: "anthropic.claude-3-7-sonnet-20250219-v1:0"}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := (chatTranslator{}).Response(c, body); err != nil {
			b.Fatal(err)
		}
	}
}
