package gemini

import "github.com/caddy-llm-gateway/caddy-llm-gateway/providers"

// Dropped lists the OpenAI chat fields Gemini has no equivalent for; the
// Gemini API rejects unknown fields, so they are left out.
var Dropped = []string{"user", "parallel_tool_calls", "logit_bias", "logprobs", "top_logprobs", "service_tier",
	"store", "metadata", "modalities", "audio", "prediction", "web_search_options", "verbosity"}

// DroppedFields implements providers.FieldDropper.
func (provider) DroppedFields(c *providers.Call) []string {
	if c.Op != providers.OpChat {
		return nil
	}
	return Dropped
}
