package ratelimit

import (
	"context"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/tokenest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// The estimate's bounds and divisor are tokenest's, the one estimate the
// cheapest load balancer prices too.
const (
	maxEstimate   = tokenest.Max
	bytesPerToken = tokenest.BytesPerToken
)

// estimateTokens is the token reservation of a request: the prompt
// estimate, ceil(size/4) over the body's bytes, plus the most it may
// generate when the client bounds that (max_tokens, max_completion_tokens
// or max_output_tokens, times n choices). It never tokenizes: an exact
// count is left to settlement, which charges the provider's usage. An
// unbounded completion reserves nothing for its output; what it produces
// is charged when it is done.
func estimateTokens(body []byte, size int64) int64 {
	prompt, out := estimateParts(body, size)
	return min(prompt+out, maxEstimate)
}

// estimateParts returns the prompt estimate and the most the request may
// generate (0 when unbounded: see reservation for what is reserved then),
// each at most maxEstimate (tokenest.Parts).
func estimateParts(body []byte, size int64) (prompt, out int64) {
	return tokenest.Parts(body, size)
}

// usedTokens is what a finished request is charged on token policies,
// and false when the outcome does not say (budgets.UsedTokens, which
// usage limits settle with too): the provider's usage, nothing for a
// cache hit or a failed request without usage, unknown for a success
// without usage (the reservation is then kept as the charge).
func usedTokens(e *observe.Entry) (int64, bool) { return budgets.UsedTokens(e) }

// settleTimeout bounds the settlement's limiter calls, which run after the
// answer was written but before the handler returns.
const settleTimeout = 2 * time.Second

// settle corrects each token reservation to the usage reported (see
// usedTokens): usage above the reservation is charged in full (an answer
// may overshoot; later requests then wait), an unused part is refunded
// while the reservation is still in its window (policies.SettleDelta). Requests policies are not
// settled: an admitted request counts whatever its outcome, a 5xx
// included, because it did reach the gateway and possibly the provider.
func (h *Handler) settle(ctx context.Context, lim policies.Limiter, id string, grants []grant, e *observe.Entry) {
	tokens, tokensKnown := usedTokens(e)
	spent, spentKnown := usedMicroUSD(e)
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for i := range grants {
		g := &grants[i]
		var used int64
		switch {
		case g.policy.Type == policies.TypeTokens && tokensKnown:
			used = tokens
		case g.policy.Type == policies.TypeCost && spentKnown:
			used = spent
		case g.held:
			// The outcome does not say: the reservation is the charge.
			used = g.cost
		default:
			continue
		}
		if err := settleGrant(ctx, lim, id, g, used, now); err != nil {
			h.st.down.failed()
			h.logFailure("rate limiter settlement failed", err)
		}
	}
}
