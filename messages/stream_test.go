package messages

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// chatSSE writes chat chunks as an SSE body.
func chatSSE(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	return b.String()
}

// events renders an expected Anthropic event sequence.
func events(evs ...[2]string) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("event: " + e[0] + "\ndata: " + e[1] + "\n\n")
	}
	return b.String()
}

const (
	startEv = `{"type":"message_start","message":{"id":"msg_chatcmpl-1","type":"message","role":"assistant","model":"gpt-4o-mini","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`
	pingEv  = `{"type":"ping"}`
	stopEv  = `{"type":"message_stop"}`
)

func TestStreamWriter(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		failed error
		want   string
	}{
		{
			name: "text with usage",
			in: chatSSE(
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" \"world\""},"finish_reason":null}]}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4}}}`,
				`[DONE]`),
			want: events(
				[2]string{"message_start", startEv},
				[2]string{"ping", pingEv},
				[2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" \"world\""}}`},
				[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`},
				[2]string{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":5,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":4}}`},
				[2]string{"message_stop", stopEv}),
		},
		{
			name: "reasoning, text and two tool calls",
			in: chatSSE(
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"reasoning_content":"Think"}}]}`,
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Checking."}}]}`,
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}]}`,
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}`,
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`[DONE]`),
			want: events(
				[2]string{"message_start", startEv},
				[2]string{"ping", pingEv},
				[2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Think"}}`},
				[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`},
				[2]string{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking."}}`},
				[2]string{"content_block_stop", `{"type":"content_block_stop","index":1}`},
				[2]string{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_1","name":"get_weather","input":{}}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`},
				[2]string{"content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"call_2","name":"get_time","input":{}}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`},
				[2]string{"content_block_stop", `{"type":"content_block_stop","index":2}`},
				[2]string{"content_block_stop", `{"type":"content_block_stop","index":3}`},
				[2]string{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`},
				[2]string{"message_stop", stopEv}),
		},
		{
			name: "error chunk after the first byte",
			in: chatSSE(
				`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
				`{"error":{"message":"the provider's stream failed before it completed","type":"upstream_error"}}`),
			want: events(
				[2]string{"message_start", startEv},
				[2]string{"ping", pingEv},
				[2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`},
				[2]string{"error", `{"type":"error","error":{"type":"api_error","message":"the provider's stream failed before it completed"}}`}),
		},
		{
			name:   "cut stream",
			in:     chatSSE(`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"}}]}`),
			failed: errors.New("connection reset"),
			want: events(
				[2]string{"message_start", startEv},
				[2]string{"ping", pingEv},
				[2]string{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
				[2]string{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`},
				[2]string{"error", `{"type":"error","error":{"type":"api_error","message":"the provider's stream failed before it completed"}}`}),
		},
		{
			name: "empty answer",
			in:   chatSSE(`[DONE]`),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Whole, and one byte at a time: the output is the same.
			for _, step := range []int{len(c.in), 1, 7} {
				var out bytes.Buffer
				s := NewStreamWriter(&out, "claude-x", nil)
				in := []byte(c.in)
				for len(in) > 0 {
					n := min(step, len(in))
					if _, err := s.Write(in[:n]); err != nil {
						t.Fatal(err)
					}
					in = in[n:]
				}
				if err := s.Close(c.failed); err != nil {
					t.Fatal(err)
				}
				if c.name == "empty answer" {
					got := out.String()
					if !strings.HasPrefix(got, "event: message_start\n") || !strings.HasSuffix(got, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || !strings.Contains(got, `"model":"claude-x"`) {
						t.Fatalf("got %s", got)
					}
					continue
				}
				if out.String() != c.want {
					t.Fatalf("step %d: got\n%s\nwant\n%s", step, out.String(), c.want)
				}
			}
		})
	}
}

// FuzzStreamWriter: whatever a chat stream holds, the writer ends the
// client's stream with message_stop or an error event, never panics.
func FuzzStreamWriter(f *testing.F) {
	f.Add([]byte(chatSSE(`{"id":"c","choices":[{"delta":{"content":"Hi","tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`, `[DONE]`)))
	f.Add([]byte("data: {\"error\":\"boom\"}\n\n"))
	f.Add([]byte("data: [[[[[[\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		s := NewStreamWriter(&out, "m", nil)
		_, _ = s.Write(in)
		if err := s.Close(nil); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if !strings.HasSuffix(got, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") && !strings.Contains(got, "event: error\n") {
			t.Fatalf("stream ends neither with message_stop nor an error: %q", got)
		}
	})
}

// TestStreamWriterAfterClose: Close gives the writer's buffer back for
// the next stream; a write or a Close after it writes nothing more.
func TestStreamWriterAfterClose(t *testing.T) {
	var out bytes.Buffer
	s := NewStreamWriter(&out, "claude-x", nil)
	in := chatSSE(`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"}}]}`, `[DONE]`)
	if _, err := s.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(nil); err != nil {
		t.Fatal(err)
	}
	done := out.String()
	// The next writer may hold the same buffer.
	var next bytes.Buffer
	n := NewStreamWriter(&next, "claude-x", nil)
	_, _ = n.Write([]byte(in))
	_, _ = s.Write([]byte(in))
	_ = s.Close(nil)
	_ = n.Close(nil)
	if out.String() != done || next.String() != done {
		t.Fatalf("after Close:\n%q\nthe next stream:\n%q\nwant\n%q", out.String(), next.String(), done)
	}
}
