package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// convert feeds body to a fresh converter in the given pieces and returns
// what it wrote, Close's error and the usage it reported.
//
//lint:ignore ST1008 the error is one of the results under test, not a failure of convert
func convert(t testing.TB, body string, pieces [][]byte) (string, error, *providers.Usage) {
	t.Helper()
	var out bytes.Buffer
	s := NewStreamConverter(&providers.Call{Op: providers.OpChat, Model: "anthropic.claude-3-7-sonnet-20250219-v1:0", Stream: true, Body: []byte(body)}, &out)
	for _, p := range pieces {
		if n, err := s.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	err := s.Close()
	return out.String(), err, s.Usage()
}

func whole(b []byte) [][]byte { return [][]byte{b} }

func bytewise(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

func randomPieces(b []byte, r *rand.Rand) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := 1 + r.IntN(min(len(b), 40))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

const withUsage = `{"stream":true,"stream_options":{"include_usage":true}}`

func TestStreamGolden(t *testing.T) {
	fixedIDs(t)
	tests := []struct {
		transcript string
		body       string
		golden     string
		wantErr    bool
		wantUsage  *providers.Usage
	}{
		{"stream_text", withUsage, "stream_text.sse", false, &providers.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}},
		{"stream_text", `{"stream":true}`, "stream_text_no_usage.sse", false, &providers.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}},
		{"stream_tools", withUsage, "stream_tools.sse", false, &providers.Usage{PromptTokens: 510, CompletionTokens: 88, TotalTokens: 598, CachedTokens: 200}},
		{"stream_reasoning", `{"stream":true}`, "stream_reasoning.sse", false, &providers.Usage{PromptTokens: 40, CompletionTokens: 30, TotalTokens: 70}},
		{"stream_exception", withUsage, "stream_exception.sse", true, nil},
		{"stream_model_error", withUsage, "stream_model_error.sse", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			frames := encodeTranscript(t, tt.transcript)
			out, err, usage := convert(t, tt.body, whole(frames))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Close err = %v, wantErr %v", err, tt.wantErr)
			}
			if (usage == nil) != (tt.wantUsage == nil) || usage != nil && *usage != *tt.wantUsage {
				t.Fatalf("usage = %+v, want %+v", usage, tt.wantUsage)
			}
			golden(t, tt.golden, []byte(out))
			// Every way of slicing the same bytes gives the same output.
			if got, _, _ := convert(t, tt.body, bytewise(frames)); got != out {
				t.Fatalf("byte-at-a-time output differs:\n%s", got)
			}
			r := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 20; i++ {
				if got, _, _ := convert(t, tt.body, randomPieces(frames, r)); got != out {
					t.Fatalf("random split %d differs:\n%s", i, got)
				}
			}
			for cut := 1; cut < len(frames); cut += 7 {
				if got, _, _ := convert(t, tt.body, [][]byte{frames[:cut], frames[cut:]}); got != out {
					t.Fatalf("split at %d differs:\n%s", cut, got)
				}
			}
		})
	}
}

// TestStreamEvents checks the chunks' meaning, independent of golden
// bytes: every data line is a JSON chunk (or the error / [DONE]).
func TestStreamEvents(t *testing.T) {
	out, err, _ := convert(t, withUsage, whole(encodeTranscript(t, "stream_tools")))
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
	if events[len(events)-1] != "data: [DONE]" {
		t.Fatalf("last event %q", events[len(events)-1])
	}
	var args [2]strings.Builder
	var ids [2]string
	var finish string
	var sawUsage bool
	id := ""
	for _, e := range events[:len(events)-1] {
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(e, "data: ")), &c); err != nil {
			t.Fatalf("%v: %s", err, e)
		}
		if id == "" {
			id = c.ID
		}
		if c.ID != id || c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk id/object changed: %s", e)
		}
		if c.Usage != nil {
			sawUsage = c.Usage.PromptTokens == 510 && len(c.Choices) == 0
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args[tc.Index].WriteString(tc.Function.Arguments)
				if tc.ID != "" {
					ids[tc.Index] = tc.ID
				}
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if args[0].String() != `{"city": "Paris"}` || args[1].String() != `{"city": "Rome"}` || ids != [2]string{"tooluse_paris", "tooluse_rome"} {
		t.Fatalf("tool calls = %q %q ids %v", args[0].String(), args[1].String(), ids)
	}
	if finish != "tool_calls" || !sawUsage {
		t.Fatalf("finish=%q usage chunk=%v", finish, sawUsage)
	}
}

func TestStreamFailures(t *testing.T) {
	text := encodeTranscript(t, "stream_text")
	corrupt := bytes.Clone(text)
	corrupt[20] ^= 0xff // inside the first frame's headers: its CRC no longer matches
	var errFrame bytes.Buffer
	m := eventstream.Message{Payload: []byte(`{}`)}
	m.Headers.Set(":message-type", eventstream.StringValue("error"))
	m.Headers.Set(":error-code", eventstream.StringValue("InternalFailure"))
	m.Headers.Set(":error-message", eventstream.StringValue("An internal error occurred"))
	_ = eventstream.NewEncoder().Encode(&errFrame, m)

	tests := []struct {
		name    string
		in      []byte
		wantMsg string
	}{
		{"truncated mid frame", text[:len(text)-5], "ended before it completed"},
		{"no messageStop", encodeTranscript(t, "stream_text")[:0], "ended before it completed"},
		{"corrupt crc", corrupt, "corrupt event stream frame"},
		{"absurd length", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}, "malformed event stream frame"},
		{"headers longer than frame", []byte{0, 0, 0, 20, 0, 0, 0, 9, 0, 0, 0, 0}, "malformed event stream frame"},
		{"error message type", errFrame.Bytes(), "An internal error occurred"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err, _ := convert(t, `{}`, whole(tt.in))
			if err == nil {
				t.Fatal("Close reported no error")
			}
			if strings.Contains(out, "[DONE]") {
				t.Fatalf("a failed stream must not end with [DONE]:\n%s", out)
			}
			last := out[strings.LastIndex(strings.TrimSuffix(out, "\n\n"), "\n\n")+1:]
			var env struct {
				Error *struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(last), "data: "))), &env); err != nil || env.Error == nil {
				t.Fatalf("last event is not an error: %q (%v)", last, err)
			}
			if !strings.Contains(env.Error.Message, tt.wantMsg) {
				t.Fatalf("message %q lacks %q", env.Error.Message, tt.wantMsg)
			}
		})
	}
}

// errWriter fails every write, like a client that went away.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("client gone") }

func TestStreamClientGone(t *testing.T) {
	s := NewStreamConverter(&providers.Call{Model: "m"}, errWriter{})
	if _, err := s.Write(encodeTranscript(t, "stream_text")); err == nil {
		t.Fatal("a failed client write must be returned")
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "ctl\x00\x01\x1f\n\r\t", "üñí €", "bad\xffutf8", "sep\u2028\u2029"} {
		got := appendJSONString(nil, s)
		want, _ := json.Marshal(s)
		if !bytes.Equal(got, want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

// FuzzBedrockStream feeds arbitrary bytes, split at arbitrary points, to
// the converter: it must never panic or block, and whatever it writes must
// be well-formed SSE whose data lines are JSON (or [DONE]).
func FuzzBedrockStream(f *testing.F) {
	for _, name := range []string{"stream_text", "stream_tools", "stream_reasoning", "stream_exception"} {
		b := encodeTranscript(f, name)
		f.Add(b, uint16(7))
		f.Add(b[:len(b)/2], uint16(1))
	}
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0}, uint16(3))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, step uint16) {
		var out bytes.Buffer
		s := NewStreamConverter(&providers.Call{Model: "m", Body: []byte(withUsage)}, &out)
		n := int(step%64) + 1
		for rest := data; len(rest) > 0; {
			k := min(n, len(rest))
			_, _ = s.Write(rest[:k])
			rest = rest[k:]
			n = n*3%61 + 1
		}
		_ = s.Close()
		for _, ev := range strings.Split(strings.TrimSuffix(out.String(), "\n\n"), "\n\n") {
			if ev == "" {
				continue
			}
			d, ok := strings.CutPrefix(ev, "data: ")
			if !ok || (d != "[DONE]" && !json.Valid([]byte(d))) {
				t.Fatalf("bad event %q", ev)
			}
		}
	})
}

func BenchmarkBedrockStreamFrame(b *testing.B) {
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	_ = enc.Encode(&buf, frame(transcriptEvent{Event: "contentBlockDelta",
		Payload: json.RawMessage(`{"contentBlockIndex":0,"delta":{"text":"Hello, world. "},"p":"abcdefghijklmnop"}`)}))
	f := buf.Bytes()
	s := NewStreamConverter(&providers.Call{Model: "anthropic.claude-3-7-sonnet-20250219-v1:0"}, discard{})
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		if _, err := s.Write(f); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
