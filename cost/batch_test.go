package cost

import (
	"math"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestBatchCost(t *testing.T) {
	u := providers.Usage{PromptTokens: 1000, CompletionTokens: 500, TotalTokens: 1500, CachedTokens: 200}
	cat, err := Parse([]byte(`{
		"anthropic/m-plain": {"litellm_provider": "anthropic", "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05, "cache_read_input_token_cost": 3e-07},
		"anthropic/m-batch": {"litellm_provider": "anthropic", "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05, "cache_read_input_token_cost": 3e-07,
			"input_cost_per_token_batches": 1e-06, "output_cost_per_token_batches": 5e-06},
		"ollama/m-local": {"litellm_provider": "ollama", "input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, provider, model string
		want                  float64
		known                 bool
	}{
		// 800 plain input, 200 cached, 500 output at half the on-demand price.
		{"discount", "anthropic", "m-plain", (800*3e-06 + 200*3e-07 + 500*1.5e-05) / 2, true},
		// Named batch prices; cache reads keep their ratio to input (1/10).
		{"batch prices", "anthropic", "m-batch", 800*1e-06 + 200*1e-07 + 500*5e-06, true},
		{"no batch API", "ollama", "m-local", 1500 * 1e-06, true},
		{"unknown model", "anthropic", "nope", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, known := cat.BatchCost(tt.provider, tt.model, u)
			if known != tt.known || math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("BatchCost = %v, %v; want %v, %v", got, known, tt.want, tt.known)
			}
		})
	}
}

func TestBatchPricesGoTogether(t *testing.T) {
	_, err := Parse([]byte(`{"anthropic/m": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05, "input_cost_per_token_batches": 1e-06}}`))
	if err == nil {
		t.Fatal("a lone batch price was accepted")
	}
}
