package bedrock

import "github.com/caddy-llm-gateway/caddy-llm-gateway/providers"

// droppedChat lists the OpenAI chat fields Converse has no place for;
// Converse rejects unknown fields, so they are left out.
var droppedChat = []string{"frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs",
	"seed", "user", "parallel_tool_calls", "response_format", "service_tier", "store", "metadata", "modalities",
	"audio", "prediction", "reasoning_effort", "functions", "function_call"}

// DroppedFields implements providers.FieldDropper.
func (p *Provider) DroppedFields(c *providers.Call) []string {
	switch c.Op {
	case providers.OpChat:
		return droppedChat
	case providers.OpEmbeddings:
		return []string{"user"}
	}
	return nil
}
