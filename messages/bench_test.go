package messages

import (
	"io"
	"os"
	"testing"
)

// The benchmark harness's request: a system prompt and one user turn.
var benchBody = []byte(`{"model":"claude-sonnet-4-5","max_tokens":256,"stream":true,"system":"You are a helpful assistant.","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`)

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(benchBody, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToChat(b *testing.B) {
	r, _ := Parse(benchBody, false)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ToChat(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromChat(b *testing.B) {
	chat := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"the quick brown fox jumps over a lazy dog while seven bright engineers measure every small delay between request and"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":20,"total_tokens":39}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := FromChat(chat, "m", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamWriter translates a 20-chunk chat stream, chunk by chunk.
func BenchmarkStreamWriter(b *testing.B) {
	var chunks [][]byte
	for i := 0; i < 20; i++ {
		chunks = append(chunks, []byte(`data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`+"\n\n"))
	}
	chunks = append(chunks, []byte(`data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"),
		[]byte(`data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":20,"total_tokens":39}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
	benchTranslate(b, chunks)
}

// BenchmarkStreamWriterTools translates a tool call streamed as OpenAI
// streams one: its first fragment, then 20 fragments of arguments.
func BenchmarkStreamWriterTools(b *testing.B) {
	chunks := [][]byte{[]byte(`data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}` + "\n\n")}
	for i := 0; i < 20; i++ {
		chunks = append(chunks, []byte(`data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}]}`+"\n\n"))
	}
	chunks = append(chunks, []byte(`data: {"id":"chatcmpl-mock-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
	benchTranslate(b, chunks)
}

// BenchmarkAssembleStream is the cache's cost of storing a native stream
// (Anthropic's documented tool-use stream): paid once per stored answer.
func BenchmarkAssembleStream(b *testing.B) {
	sse, err := os.ReadFile("../providers/anthropic/testdata/stream_tools.sse")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := AssembleStream(sse); !ok {
			b.Fatal("not assembled")
		}
	}
}

// BenchmarkSynthesizeStream is a cache hit's cost of replaying a stored
// answer as Anthropic's events.
func BenchmarkSynthesizeStream(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := SynthesizeStream([]byte(streamToolsAnswer)); !ok {
			b.Fatal("no stream form")
		}
	}
}

// benchTranslate translates chunks, one Write each, b.N times.
func benchTranslate(b *testing.B, chunks [][]byte) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s := NewStreamWriter(io.Discard, "m", nil)
		for _, c := range chunks {
			if _, err := s.Write(c); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(nil); err != nil {
			b.Fatal(err)
		}
	}
}
