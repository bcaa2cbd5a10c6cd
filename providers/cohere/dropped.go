package cohere

import "github.com/caddy-llm-gateway/caddy-llm-gateway/providers"

// dropped lists the OpenAI chat fields Cohere's v2 chat has no equivalent
// for; they are left out of the translated request.
var dropped = []string{"n", "user", "logit_bias", "logprobs", "top_logprobs", "parallel_tool_calls",
	"service_tier", "store", "metadata", "modalities", "audio", "prediction", "reasoning_effort"}

// DroppedFields implements providers.FieldDropper.
func (provider) DroppedFields(c *providers.Call) []string {
	if c.Op != providers.OpChat {
		return nil
	}
	return dropped
}
