package anthropic

import "github.com/caddy-llm-gateway/caddy-llm-gateway/providers"

// Dropped lists the OpenAI chat fields the Messages API has no equivalent
// for; Anthropic rejects unknown fields, so they are left out.
var Dropped = []string{"n", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
	"top_logprobs", "response_format", "reasoning_effort", "service_tier", "store", "metadata", "modalities",
	"audio", "prediction", "web_search_options", "verbosity"}

// DroppedFields implements providers.FieldDropper.
func (provider) DroppedFields(c *providers.Call) []string {
	if c.Op != providers.OpChat {
		return nil
	}
	return Dropped
}
