package messages

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// chatUsage reads a chat completion's usage object (nil when absent),
// with the cache counts OpenAI (prompt_tokens_details.cached_tokens) and
// the gateway's Anthropic translation (cache_*_input_tokens) report.
func chatUsage(raw []byte) *providers.Usage {
	u := gjson.ParseBytes(raw)
	if !u.IsObject() {
		return nil
	}
	out := &providers.Usage{
		PromptTokens:     u.Get("prompt_tokens").Int(),
		CompletionTokens: u.Get("completion_tokens").Int(),
		TotalTokens:      u.Get("total_tokens").Int(),
		CachedTokens:     u.Get("prompt_tokens_details.cached_tokens").Int(),
		CacheWriteTokens: u.Get("cache_creation_input_tokens").Int(),
		ReasoningTokens:  u.Get("completion_tokens_details.reasoning_tokens").Int(),
	}
	if out.CachedTokens == 0 {
		out.CachedTokens = u.Get("cache_read_input_tokens").Int()
	}
	return out
}
