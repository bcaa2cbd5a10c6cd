package handlers

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails/checks"
)

// BenchmarkGuardTwoCheapChecks is the gateway's own work for a request
// with two cheap input checks (a regex and a word count): the checks, the
// hook_results marshalled once, and attaching them to the answer.
func BenchmarkGuardTwoCheapChecks(b *testing.B) {
	rn := &guardrails.Runner{}
	hooks := []json.RawMessage{json.RawMessage(`{"default.regexMatch":{"rule":"(?i)ignore (all|previous) instructions","not":true},"default.wordCount":{"minWords":1,"maxWords":500},"deny":true}`)}
	req := &guardrails.Request{
		Body: []byte(`{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in one word."}]}`),
		Type: "chatComplete", Provider: "openai", Model: "m",
	}
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		before, err := rn.Before(ctx, hooks, req)
		if err != nil || before.Denied() {
			b.Fatal(err)
		}
		rec := &hookRecord{before: before}
		if out := attachResults(answer, rec.json()); len(out) == len(answer) {
			b.Fatal("not attached")
		}
	}
}

func TestWithHookEvent(t *testing.T) {
	cases := []struct{ in, want string }{
		{"data: {\"a\":1}\n\ndata: [DONE]\n\n", "data: {\"a\":1}\n\ndata: {\"hook_results\":{}}\n\ndata: [DONE]\n\n"},
		{"data: {\"a\":1}\r\n\r\ndata: [DONE]", "data: {\"a\":1}\r\n\r\ndata: {\"hook_results\":{}}\n\ndata: [DONE]"},
		{"data: {\"a\":1}\n\n", "data: {\"a\":1}\n\ndata: {\"hook_results\":{}}\n\n"},
		{"data: {\"a\":1}", "data: {\"a\":1}\n\ndata: {\"hook_results\":{}}\n\n"},
	}
	for _, tc := range cases {
		if got := string(withHookEvent([]byte(tc.in), []byte(`{}`))); got != tc.want {
			t.Errorf("withHookEvent(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStreamText(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\r\n\r\ndata: [DONE]"
	if got := streamText([]byte(body)); got != "Hello" {
		t.Fatalf("streamText = %q", got)
	}
}

func TestAttachResults(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":1}`, `{"a":1,"hook_results":{"x":1}}`},
		{"{\"a\":1}\n", `{"a":1,"hook_results":{"x":1}}`},
		{`{ }`, `{ "hook_results":{"x":1}}`},
		{`{"hook_results":null,"a":1}`, `{"hook_results":{"x":1},"a":1}`},
		{`[1]`, `[1]`},
		{``, ``},
		{`"s"`, `"s"`},
	}
	for _, tc := range cases {
		got := string(attachResults([]byte(tc.in), []byte(`{"x":1}`)))
		if got != tc.want {
			t.Errorf("attachResults(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.want != "" && tc.want[0] == '{' && !json.Valid([]byte(got)) {
			t.Errorf("attachResults(%q) = %q: not JSON", tc.in, got)
		}
	}
}
