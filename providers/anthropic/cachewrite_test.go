package anthropic

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

// TestCacheWriteUsage checks that cache_creation_input_tokens reaches the
// gateway's usage apart from plain input (it is priced at the cache-write
// rate), in whole answers and streams alike.
func TestCacheWriteUsage(t *testing.T) {
	want := providers.Usage{PromptTokens: 1130, CompletionTokens: 12, TotalTokens: 1142, CachedTokens: 100, CacheWriteTokens: 1000}
	t.Run("response", func(t *testing.T) {
		in := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",` +
			`"usage":{"input_tokens":30,"cache_creation_input_tokens":1000,"cache_read_input_tokens":100,"output_tokens":12}}`
		_, u, err := Chat{Provider: Slug}.Response(&providers.Call{Op: providers.OpChat, Model: "claude-sonnet-4-5"}, []byte(in))
		if err != nil || u == nil || *u != want {
			t.Fatalf("usage %+v err %v; want %+v", u, err, want)
		}
	})
	t.Run("stream", func(t *testing.T) {
		in := "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":30,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n" +
			"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":12}}\n\n" +
			"data: {\"type\":\"message_stop\"}\n\n"
		_, u, err := goldentest.RunStream(Chat{Provider: Slug}, &providers.Call{Stream: true}, []byte(in), 0)
		if err != nil || u == nil || *u != want {
			t.Fatalf("usage %+v err %v; want %+v", u, err, want)
		}
	})
}
