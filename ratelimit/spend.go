package ratelimit

import (
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/tokenest"
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

// reservation is what a request reserves on tokens and cost policies,
// worked out once per request on first need and shared by its policies.
type reservation struct {
	done bool
	// prompt is the prompt estimate; out is the client's output bound,
	// 0 when it set none.
	prompt, out int64
	// open is true for a generation request without an output bound: it
	// reserves a default output (reservation.output).
	open bool
	// price is the model's price; priced reports whether it is known
	// (looked up on the first cost policy).
	price                cost.Price
	priced, priceChecked bool
}

// DefaultOutputTokens is the output a tokens or cost policy reserves for a
// generation request without max_tokens (or max_completion_tokens,
// max_output_tokens) when neither the policy (default_reservation) nor the
// handler (default_output_tokens) says otherwise. Reserving nothing let a
// wave of concurrent requests pass a budget before any usage settled
// (US$0.21 spent against US$0.05 with 100 concurrent requests); the answer
// is still charged what it used, so the default only has to cover a
// typical answer, not the model's longest.
const DefaultOutputTokens = tokenest.DefaultOutput

// res fills and returns q's reservation.
func (q *request) res() *reservation {
	r := &q.reservation
	if !r.done {
		r.done = true
		r.prompt, r.out = estimateParts(q.body, q.size)
		r.open = r.out == 0 && len(q.body) > 0 && generates(q.r.URL.Path)
	}
	return r
}

// generates reports whether path is an endpoint whose answer is generated
// output (chat, completions, responses, messages), as opposed to
// embeddings, moderations, audio or management paths.
func generates(path string) bool {
	for _, s := range [...]string{"/completions", "/responses", "/messages"} {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}

// output is the output p reserves for the request: the client's bound,
// or for an open request the policy's default_reservation, else the
// handler's default_output_tokens.
func (h *Handler) output(r *reservation, p *policies.Policy) int64 {
	switch {
	case !r.open:
		return r.out
	case p.DefaultReservation > 0:
		return p.DefaultReservation
	case h.DefaultOutputTokens > 0:
		return h.DefaultOutputTokens
	}
	return DefaultOutputTokens
}

// reserveTokens is a request's token reservation on p: the prompt
// estimate plus the output it reserves.
func (h *Handler) reserveTokens(q *request, p *policies.Policy) int64 {
	r := q.res()
	return min(r.prompt+h.output(r, p), maxEstimate)
}

// reserveSpend is a request's cost reservation on p in micro-dollars
// (estimateSpend), as cost rate-limit policies count.
func (h *Handler) reserveSpend(q *request, p *policies.Policy) int64 {
	return microUSD(h.estimateSpend(q, p))
}

// estimateSpend is the most likely cost of a request on p, in dollars:
// the prompt estimate at the input price plus the output it reserves at
// the output (or reasoning) price, for the provider and model it names.
// A request whose provider or model has no known price reserves nothing:
// its cost, being unknown, is not charged either.
func (h *Handler) estimateSpend(q *request, p *policies.Policy) float64 {
	r := q.res()
	if !r.priceChecked {
		r.priceChecked = true
		if pc, ok := h.ctl.(pricer); ok {
			q.fill(policies.PendingRouting)
			r.price, r.priced = pc.Prices().Price(q.attrs.Provider, q.attrs.Model)
		}
	}
	if !r.priced {
		return 0
	}
	return r.price.Estimate(r.prompt, h.output(r, p))
}

// microUSD converts dollars to whole micro-dollars, rounding up (the
// one conversion, shared with usage limits: budgets.MicroUSD).
func microUSD(usd float64) int64 { return budgets.MicroUSD(usd) }

// usedMicroUSD is what a finished request is charged on cost policies,
// and false when the outcome does not say (budgets.UsedMicroUSD, which
// usage limits settle with too).
func usedMicroUSD(e *observe.Entry) (int64, bool) { return budgets.UsedMicroUSD(e) }
