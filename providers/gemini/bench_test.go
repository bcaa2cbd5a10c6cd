package gemini

import (
	"io"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func BenchmarkGeminiResponse(b *testing.B) {
	body := goldentest.Read(b, "testdata/response_tools.json")
	c := &providers.Call{Op: providers.OpChat, Model: "gemini"}
	tr := Chat{Provider: Slug}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := tr.Response(c, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGeminiStreamChunk measures one streamed text event (a whole
// GenerateContentResponse with usage, as Gemini sends them) in its own
// read.
func BenchmarkGeminiStreamChunk(b *testing.B) {
	ev := []byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hello, how are you doing today?\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 8,\"totalTokenCount\": 8},\"modelVersion\": \"gemini-2.0-flash\",\"responseId\": \"r1\"}\r\n\r\n")
	c := &providers.Call{Op: providers.OpChat, Model: "gemini", Stream: true}
	conv := Chat{Provider: Slug}.Stream(c, io.Discard)
	b.ReportAllocs()
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		if _, err := conv.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
}
