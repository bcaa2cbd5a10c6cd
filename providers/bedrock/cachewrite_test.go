package bedrock

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestCacheWriteUsage checks that Converse's cacheWriteInputTokens reaches
// the gateway's usage apart from plain input (it is priced at the
// cache-write rate) and the client's usage object, in whole answers and
// streams alike.
func TestCacheWriteUsage(t *testing.T) {
	const usage = `{"inputTokens":30,"outputTokens":12,"totalTokens":1142,"cacheReadInputTokens":100,"cacheWriteInputTokens":1000}`
	want := providers.Usage{PromptTokens: 1130, CompletionTokens: 12, TotalTokens: 1142, CachedTokens: 100, CacheWriteTokens: 1000}
	t.Run("response", func(t *testing.T) {
		in := `{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"end_turn","usage":` + usage + `}`
		out, u, err := chatTranslator{}.Response(&providers.Call{Model: "anthropic.claude-sonnet-4-5-20250929-v1:0"}, []byte(in))
		if err != nil || u == nil || *u != want {
			t.Fatalf("usage %+v err %v; want %+v", u, err, want)
		}
		var got struct {
			Usage struct {
				CacheCreation int64 `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(out, &got); err != nil || got.Usage.CacheCreation != 1000 {
			t.Fatalf("client usage %s (%v)", out, err)
		}
	})
	t.Run("stream", func(t *testing.T) {
		var body bytes.Buffer
		enc := eventstream.NewEncoder()
		for _, e := range []transcriptEvent{
			{Event: "messageStart", Payload: json.RawMessage(`{"role":"assistant"}`)},
			{Event: "contentBlockDelta", Payload: json.RawMessage(`{"contentBlockIndex":0,"delta":{"text":"x"}}`)},
			{Event: "messageStop", Payload: json.RawMessage(`{"stopReason":"end_turn"}`)},
			{Event: "metadata", Payload: json.RawMessage(`{"usage":` + usage + `}`)},
		} {
			if err := enc.Encode(&body, frame(e)); err != nil {
				t.Fatal(err)
			}
		}
		_, err, u := convert(t, `{"stream_options":{"include_usage":true}}`, whole(body.Bytes()))
		if err != nil || u == nil || *u != want {
			t.Fatalf("usage %+v err %v; want %+v", u, err, want)
		}
	})
}
