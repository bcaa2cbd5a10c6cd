package ratelimit

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func TestUsedMicroUSD(t *testing.T) {
	u := &providers.Usage{PromptTokens: 10, CompletionTokens: 5}
	tests := []struct {
		name  string
		e     *observe.Entry
		want  int64
		known bool
	}{
		{"priced", &observe.Entry{Status: 200, Usage: u, CostUSD: 0.00264, CostKnown: true}, 2640, true},
		{"fraction rounds up", &observe.Entry{Status: 200, Usage: u, CostUSD: 3.15e-6, CostKnown: true}, 4, true},
		{"cache hit is free", &observe.Entry{Status: 200, Usage: u, CacheState: "HIT", CostUSD: 1, CostKnown: true}, 0, true},
		{"unknown price keeps the reservation", &observe.Entry{Status: 200, Usage: u}, 0, false},
		{"success without usage keeps the reservation", &observe.Entry{Status: 200}, 0, false},
		{"failure without usage is free", &observe.Entry{Status: 502}, 0, true},
		{"huge cost is bounded", &observe.Entry{Status: 200, Usage: u, CostUSD: 1e30, CostKnown: true}, maxEstimate, true},
		{"no entry", nil, 0, false},
	}
	for _, tt := range tests {
		got, known := usedMicroUSD(tt.e)
		if got != tt.want || known != tt.known {
			t.Errorf("%s: %d, %v; want %d, %v", tt.name, got, known, tt.want, tt.known)
		}
	}
}
