package cost

import "github.com/caddy-llm-gateway/caddy-llm-gateway/providers"

// BatchDiscount is the share of the on-demand price each provider's batch
// job API charges, as the providers publish it: Anthropic's Message
// Batches, Bedrock batch inference, Vertex AI batch prediction, the
// Gemini API's batch mode and OpenAI's Batch API all bill 50 % of the
// on-demand price for every kind of token (cache reads and writes
// included). The maintained price data the catalog is generated from
// (genai-prices) carries no batch prices, so the discount is what prices a
// batch line unless a price file names the batch prices of a model
// (input_cost_per_token_batches, output_cost_per_token_batches).
var BatchDiscount = map[string]float64{
	"anthropic":    0.5,
	"bedrock":      0.5,
	"vertex-ai":    0.5,
	"google":       0.5,
	"openai":       0.5,
	"azure-openai": 0.5,
}

// BatchCost is what u costs as a line of provider's batch job API: the
// model's batch prices when the catalog has them, else its on-demand cost
// times the provider's BatchDiscount (the on-demand cost for a provider
// without one). known is false when the model has no price.
func (c *Catalog) BatchCost(provider, model string, u providers.Usage) (usd float64, known bool) {
	p, ok := c.Price(provider, model)
	if !ok {
		return 0, false
	}
	return p.BatchCost(provider, u), true
}

// BatchCost is Cost for a line of provider's batch job API (see
// Catalog.BatchCost).
func (p Price) BatchCost(provider string, u providers.Usage) float64 {
	if !p.HasBatch {
		share, ok := BatchDiscount[provider]
		if !ok {
			share = 1
		}
		return p.Cost(u) * share
	}
	// The batch prices replace the plain input and output prices; cache
	// reads, writes and reasoning keep their ratio to them.
	q := p
	q.Input, q.Output = p.BatchInput, p.BatchOutput
	if p.Input > 0 {
		q.CachedInput = p.CachedInput * p.BatchInput / p.Input
		q.CacheWrite = p.CacheWrite * p.BatchInput / p.Input
	}
	if p.Output > 0 {
		q.Reasoning = p.Reasoning * p.BatchOutput / p.Output
	}
	return q.Cost(u)
}
