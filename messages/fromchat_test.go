package messages

import (
	"net/http"
	"testing"
)

func TestFromChat(t *testing.T) {
	cases := []struct{ name, chat, want string }{
		{
			name: "text",
			chat: `{"id":"chatcmpl-123","object":"chat.completion","created":1677652288,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how may I assist you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
			want: `{"id":"msg_chatcmpl-123","type":"message","role":"assistant","model":"gpt-4o-mini","content":[{"type":"text","text":"Hello there, how may I assist you today?"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		},
		{
			name: "tool calls, cached prompt tokens",
			chat: `{"id":"chatcmpl-abc","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123","type":"function","function":{"name":"get_current_weather","arguments":"{\n\"location\": \"Boston, MA\"\n}"}},{"id":"call_2","type":"function","function":{"name":"noargs","arguments":""}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,"prompt_tokens_details":{"cached_tokens":64}}}`,
			want: `{"id":"msg_chatcmpl-abc","type":"message","role":"assistant","model":"gpt-4o","content":[{"type":"tool_use","id":"call_abc123","name":"get_current_weather","input":{"location":"Boston, MA"}},{"type":"tool_use","id":"call_2","name":"noargs","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":18,"output_tokens":17,"cache_creation_input_tokens":0,"cache_read_input_tokens":64}}`,
		},
		{
			name: "reasoning and length, model from the request",
			chat: `{"id":"x","choices":[{"message":{"role":"assistant","reasoning_content":"Let me see.","content":"The answer"},"finish_reason":"length"}]}`,
			want: `{"id":"msg_x","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"Let me see.","signature":""},{"type":"text","text":"The answer"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		},
		{
			name: "refusal and unparsable arguments",
			chat: `{"id":"y","model":"m","choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
			want: `{"id":"msg_y","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"I can't help with that."}],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromChat([]byte(c.chat), "claude-sonnet-4-5", nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := compact(t, c.want); string(got) != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
	for _, bad := range []string{`{"choices":[]}`, `[1]`, `{"choices":`} {
		if _, err := FromChat([]byte(bad), "m", nil); err == nil {
			t.Errorf("FromChat(%s) accepted it", bad)
		}
	}
	if got := string(ToolInput("not json")); got != `{"arguments":"not json"}` {
		t.Fatal(got)
	}
}

func TestReshape(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"gateway envelope", 401, `{"error":{"message":"invalid gateway API key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid gateway API key"}}`},
		{"validation", 400, `{"error":{"message":"max_tokens: Field required","type":"invalid_request_error","param":"max_tokens","code":null}}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`},
		{"already anthropic", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"openai rate limit", 429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"}}`},
		{"guardrail denial keeps hook results", 446, `{"error":{"message":"The guardrail checks defined in the config failed.","type":"hooks_failed","code":"446"},"hook_results":{"before_request_hooks":[]}}`,
			`{"type":"error","error":{"type":"hooks_failed","message":"The guardrail checks defined in the config failed."},"hook_results":{"before_request_hooks":[]}}`},
		{"aws message", 400, `{"message":"Malformed input request"}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"Malformed input request"}}`},
		{"google envelope", 404, `{"error":{"code":404,"message":"Publisher model not found","status":"NOT_FOUND"}}`,
			`{"type":"error","error":{"type":"not_found_error","message":"Publisher model not found"}}`},
		{"html page", 502, `<html>bad gateway</html>`,
			`{"type":"error","error":{"type":"api_error","message":"the provider answered Bad Gateway: <html>bad gateway</html>"}}`},
		{"timeout", http.StatusRequestTimeout, `{"error":{"message":"timed out"}}`,
			`{"type":"error","error":{"type":"timeout_error","message":"timed out"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(Reshape(c.status, []byte(c.body))); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
	if got := string(ErrorEvent(TypeAPI, "cut")); got != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"cut\"}}\n\n" {
		t.Fatal(got)
	}
}
