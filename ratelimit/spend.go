package ratelimit

import (
	"math"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Spend limits (policies of type cost) count micro-dollars. They reserve
// the most a request can cost at admission and settle on the cost the
// gateway computed from the provider's usage, exactly as token policies
// do with tokens.

// pricer is what the control offers for spend limits: the llm app's
// price catalog.
type pricer interface {
	Prices() *cost.Catalog
}

// estimateSpend is a request's cost reservation in micro-dollars: the
// prompt estimate at the input price plus the bounded output at the
// output (or reasoning) price, for the provider and model it names. A
// request whose provider or model has no known price reserves nothing:
// its cost, being unknown, is not charged either.
func (h *Handler) estimateSpend(q *request) int64 {
	pc, ok := h.ctl.(pricer)
	if !ok {
		return 0
	}
	q.fill(policies.PendingRouting)
	price, ok := pc.Prices().Price(q.attrs.Provider, q.attrs.Model)
	if !ok {
		return 0
	}
	prompt, out := estimateParts(q.body, q.size)
	return microUSD(price.Estimate(prompt, out))
}

// microUSD converts dollars to whole micro-dollars, rounding up so that a
// request costing a fraction of a micro-dollar still counts, and bounded
// like every counter.
func microUSD(usd float64) int64 {
	if !(usd > 0) {
		return 0
	}
	m := math.Ceil(usd * policies.MicroUSD)
	if m > float64(maxEstimate) {
		return maxEstimate
	}
	return int64(m)
}

// usedMicroUSD is what a finished request is charged on cost policies,
// and false when the outcome does not say: nothing for a cache hit or a
// failed request without usage; the computed cost when the model's price
// is known; unknown otherwise (no usage on a success, or no price), in
// which case the reservation stands.
func usedMicroUSD(e *observe.Entry) (int64, bool) {
	if e == nil {
		return 0, false
	}
	if cache.IsHit(e.CacheState) {
		return 0, true
	}
	if e.Usage == nil {
		return 0, e.Status < 200 || e.Status > 299
	}
	if !e.CostKnown {
		return 0, false
	}
	return microUSD(e.CostUSD), true
}
