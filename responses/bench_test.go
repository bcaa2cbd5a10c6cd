package responses

import (
	"io"
	"os"
	"testing"
)

// BenchmarkRequestToChat is the cost per request of Parse + ToChat for a
// function-call round trip with tools (testdata/request/function_round_trip.json).
func BenchmarkRequestToChat(b *testing.B) {
	body, err := os.ReadFile("testdata/request/function_round_trip.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r, err := Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ToChat(r, r.Input); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAnswerFromChat is the cost per answer of FromChat + JSON for a
// reasoning + text + two tool calls answer.
func BenchmarkAnswerFromChat(b *testing.B) {
	chat, err := os.ReadFile("testdata/answer/anthropic_tools.chat.json")
	if err != nil {
		b.Fatal(err)
	}
	r, err := Parse([]byte(answerRequest))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := FromChat(chat, r)
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.JSON()
	}
}

// BenchmarkStreamTextDelta is the cost per chat chunk in the steady state
// of a text stream: one chunk in, one response.output_text.delta out.
func BenchmarkStreamTextDelta(b *testing.B) {
	r, err := Parse([]byte(answerRequest))
	if err != nil {
		b.Fatal(err)
	}
	chunk := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"gemini-2.5-flash","choices":[{"index":0,"delta":{"content":" some streamed words"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	w := NewStreamWriter(io.Discard, r)
	_, _ = w.Write(chunk)
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if _, err := w.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamWhole is the cost of translating a whole recorded stream
// (reasoning, text, two tool calls, usage: 12 chunks, 25 events out).
func BenchmarkStreamWhole(b *testing.B) {
	in, err := os.ReadFile("testdata/stream/anthropic_tools.sse")
	if err != nil {
		b.Fatal(err)
	}
	r, err := Parse([]byte(answerRequest))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		w := NewStreamWriter(io.Discard, r)
		_, _ = w.Write(in)
		_ = w.Close(nil)
	}
}
