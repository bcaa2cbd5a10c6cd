package handlers

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestTextChars(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int64
	}{
		{"chat delta", `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}` + "\n\n", 5},
		{"two events", `data: {"choices":[{"delta":{"content":"ab"}}]}` + "\n\n" + `data: {"choices":[{"delta":{"content":"cd"}}]}` + "\n\n", 4},
		{"escapes and unicode", `data: {"choices":[{"delta":{"content":"a\"b\\né"}}]}`, 8},
		{"tool arguments", `data: {"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{\"x\":1}"}}]}}]}`, 9},
		{"responses delta", `event: response.output_text.delta` + "\n" + `data: {"type":"response.output_text.delta","item_id":"i","delta":"Hi there"}`, 8},
		{"anthropic", `event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hey"}}`, 3},
		{"no text", `data: {"id":"c","object":"chat.completion.chunk","choices":[{"delta":{},"finish_reason":"stop"}]}`, 0},
		{"cut off", `data: {"choices":[{"delta":{"content":"abc`, 3},
		{"done", "data: [DONE]\n\n", 0},
	} {
		if got := textChars([]byte(tc.in), allTextKeys); got != tc.want {
			t.Errorf("%s: %d characters, want %d", tc.name, got, tc.want)
		}
	}
	var off deliveredText
	off.add([]byte(`{"content":"abc"}`))
	if off.n != 0 {
		t.Error("a call that is no stream counts its text")
	}
}

// TestDeliveredTextCountsEachFormatOnce: a stream's text is counted once
// whatever its format repeats: a chat chunk translated from an Anthropic
// thinking delta carries the text as reasoning_content and again in
// content_blocks, and the Responses API's done events repeat the text,
// arguments and refusal their deltas carried.
func TestDeliveredTextCountsEachFormatOnce(t *testing.T) {
	chunk := func(delta string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	ev := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + rest + "}\n\n"
	}
	for _, tc := range []struct {
		name   string
		writes []string
		want   int64
	}{
		{"chat translated from Anthropic thinking", []string{
			chunk(`{"role":"assistant","content":""}`),
			chunk(`{"reasoning_content":"Let me think","content_blocks":[{"index":0,"delta":{"thinking":"Let me think"}}]}`),
			chunk(`{"content_blocks":[{"index":0,"delta":{"signature":"c2lnbmF0dXJl"}}]}`),
			chunk(`{"content":"Four."}`),
		}, 12 + 5},
		{"responses with done events", []string{
			ev("response.created", `,"response":{"id":"r","status":"in_progress","instructions":"be brief"}`),
			ev("response.output_text.delta", `,"item_id":"m","delta":"Hello"`),
			ev("response.output_text.done", `,"item_id":"m","text":"Hello"`),
			ev("response.content_part.done", `,"part":{"type":"output_text","text":"Hello"}`),
			ev("response.function_call_arguments.delta", `,"item_id":"f","delta":"{}"`),
			ev("response.function_call_arguments.done", `,"item_id":"f","arguments":"{}"`),
			ev("response.refusal.done", `,"refusal":"no"`),
		}, 5 + 2},
		{"anthropic native", []string{
			ev("message_start", `,"message":{"id":"m","content":[],"usage":{"input_tokens":3}}`),
			ev("content_block_start", `,"index":0,"content_block":{"type":"thinking","thinking":""}`),
			ev("content_block_delta", `,"index":0,"delta":{"type":"thinking_delta","thinking":"Hmm"}`),
			ev("content_block_delta", `,"index":1,"delta":{"type":"text_delta","text":"Yes"}`),
		}, 3 + 3},
		{"format never named", []string{`data: {"content":"ab"}` + "\n\n", `data: {"delta":"cd"}` + "\n\n"}, 4},
	} {
		d := deliveredText{on: true}
		for _, w := range tc.writes {
			d.add([]byte(w))
		}
		if d.n != tc.want {
			t.Errorf("%s: %d characters, want %d", tc.name, d.n, tc.want)
		}
	}
}

// TestEstimateBrokenStream: only a stream that started and ended (broken
// off or not) without usage is estimated, from its body and the text
// delivered.
func TestEstimateBrokenStream(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`) // 71 bytes
	flightOf := func(stream bool, status int, err string, usage *providers.Usage, label string) *flight {
		f := &flight{q: &Request{}, res: &result{usage: usage, err: err}, status: status, done: status != 0}
		f.q.Call.Stream, f.q.Call.Body = stream, body
		f.res.label = label
		f.out.text.n = 9
		return f
	}
	for _, tc := range []struct {
		name string
		f    *flight
		want *providers.Usage
	}{
		{"client gone", flightOf(true, 200, "client closed the connection mid-response", nil, ""), &providers.Usage{PromptTokens: 18, CompletionTokens: 3, TotalTokens: 21}},
		{"completed without usage", flightOf(true, 200, "", nil, ""), &providers.Usage{PromptTokens: 18, CompletionTokens: 3, TotalTokens: 21}},
		{"usage reported", flightOf(true, 200, "client closed the connection mid-response", &providers.Usage{PromptTokens: 1}, ""), &providers.Usage{PromptTokens: 1}},
		{"not a stream", flightOf(false, 200, "client closed the connection mid-response", nil, ""), nil},
		{"failed before it started", flightOf(true, 502, "upstream failed", nil, ""), nil},
		{"cache hit", flightOf(true, 200, "client closed the connection mid-response", nil, "HIT"), nil},
	} {
		tc.f.estimateBrokenStream()
		got := tc.f.res.usage
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: usage %+v, want %+v", tc.name, got, tc.want)
		}
		if tc.f.entry.UsageEstimated != (tc.want != nil && tc.want.TotalTokens == 21) {
			t.Errorf("%s: estimated %v", tc.name, tc.f.entry.UsageEstimated)
		}
	}
}

// BenchmarkTextChars is the added cost of counting a streamed chunk's
// text on its way to the client (one OpenAI chat chunk a write).
func BenchmarkTextChars(b *testing.B) {
	p := []byte(`data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	b.SetBytes(int64(len(p)))
	for i := 0; i < b.N; i++ {
		if textChars(p, chatTextKeys) != 6 {
			b.Fatal("miscounted")
		}
	}
}
