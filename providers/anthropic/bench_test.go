package anthropic

import (
	"io"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func BenchmarkAnthropicResponse(b *testing.B) {
	body := goldentest.Read(b, "testdata/response_tools.json")
	c := &providers.Call{Op: providers.OpChat, Model: "claude"}
	tr := Chat{Provider: Slug}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := tr.Response(c, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAnthropicStreamChunk measures one text delta event, the
// common case of a stream, arriving in its own read.
func BenchmarkAnthropicStreamChunk(b *testing.B) {
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, how are you doing today?\"}}\n\n")
	c := &providers.Call{Op: providers.OpChat, Model: "claude", Stream: true}
	conv := Chat{Provider: Slug}.Stream(c, io.Discard)
	_, _ = conv.Write([]byte("data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":1}}}\n\n"))
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		if _, err := conv.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNativeStreamChunk measures the pass-through of one text delta
// event, whole in its read (the common case) and cut across two reads.
func BenchmarkNativeStreamChunk(b *testing.B) {
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello, how are you doing today?\"}}\n\n")
	for _, cut := range []int{0, 40} {
		name := "whole"
		if cut > 0 {
			name = "cut"
		}
		b.Run(name, func(b *testing.B) {
			s := NewNativeStream(io.Discard)
			b.ReportAllocs()
			b.SetBytes(int64(len(ev)))
			for b.Loop() {
				if cut == 0 {
					_, _ = s.Write(ev)
					continue
				}
				_, _ = s.Write(ev[:cut])
				_, _ = s.Write(ev[cut:])
			}
		})
	}
}
