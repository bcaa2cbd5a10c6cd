package budgets

import (
	"math"
	"strconv"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// maxUnits bounds a charge, like every counter (policies.MaxValue).
const maxUnits = int64(policies.MaxValue)

// MicroUSD converts dollars to whole micro-dollars, rounding up so that a
// request costing a fraction of a micro-dollar still counts, bounded.
func MicroUSD(usd float64) int64 {
	if !(usd > 0) {
		return 0
	}
	m := math.Ceil(usd * policies.MicroUSD)
	if m > float64(maxUnits) {
		return maxUnits
	}
	return int64(m)
}

// NanoUSD converts dollars to whole nano-dollars as the ledger does
// (ledger.NanoFromUSD: to the nearest), so a budget's counter and the
// ledger's records of the same requests add up to the same sum; bounded
// like every charge.
func NanoUSD(usd float64) int64 {
	return min(ledger.NanoFromUSD(usd), maxUnits)
}

// UsedMicroUSD is what a finished request is charged on cost rate-limit
// policies, in whole micro-dollars rounded up (MicroUSD), and false when
// its outcome does not say (usedUSD).
func UsedMicroUSD(e *observe.Entry) (int64, bool) {
	usd, known := usedUSD(e)
	return MicroUSD(usd), known
}

// UsedNanoUSD is what a finished request is charged on cost usage limits,
// in nano-dollars: what its ledger record says it cost (NanoUSD), and
// false when its outcome does not say (usedUSD).
func UsedNanoUSD(e *observe.Entry) (int64, bool) {
	usd, known := usedUSD(e)
	return NanoUSD(usd), known
}

// usedUSD is what a finished request cost, and false when its outcome
// does not say: nothing for a cache hit or a failed request without
// usage; the computed cost when the model's price is known; unknown
// otherwise (no usage on a success, or no price), in which case the
// reservation stands.
func usedUSD(e *observe.Entry) (float64, bool) {
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
	return e.CostUSD, true
}

// UsedTokens is what a finished request is charged on token limits, and
// false when its outcome does not say: the provider's prompt plus
// completion tokens (or the reported total when larger: embeddings report
// only prompt and total); nothing for a cache hit or a failed request
// without usage; unknown for a successful answer without usage.
func UsedTokens(e *observe.Entry) (int64, bool) {
	if e == nil {
		return 0, false
	}
	if cache.IsHit(e.CacheState) {
		return 0, true
	}
	if e.Usage == nil {
		return 0, e.Status < 200 || e.Status > 299
	}
	u := e.Usage
	used := max(u.PromptTokens, 0) + max(u.CompletionTokens, 0)
	return min(max(used, u.TotalTokens), maxUnits), true
}

// formatFloat formats v without exponent or trailing zeros.
func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}
