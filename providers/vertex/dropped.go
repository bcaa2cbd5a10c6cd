package vertex

import (
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
)

// DroppedFields implements providers.FieldDropper: Claude models on
// Vertex drop what Anthropic drops, Gemini models what Gemini drops.
func (p *provider) DroppedFields(c *providers.Call) []string {
	if c.Op != providers.OpChat {
		return nil
	}
	if pub, _, err := SplitModel(c.Model); err == nil && pub == Anthropic {
		return anthropic.Dropped
	}
	return gemini.Dropped
}
