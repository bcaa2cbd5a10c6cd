package handlers

import (
	"unsafe"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/tokenest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Token preflight. Once every leaf's attempt is planned (its body and
// model known: a prompt rendered, override_params merged, a format
// adapter's chat completion made), each target whose model has a
// context window in the price catalog (cost.Catalog.Window) is checked
// against the input it would be sent. A target the input cannot fit is
// marked routing.Target.Unfit, and the router passes it over with no
// upstream call, as it passes over an open breaker: a fallback or a
// loadbalance goes to a sibling that fits, and when none does the
// answer is a 400 context_length_exceeded. Decided here once, for every
// road that plans attempts (chat, completions, Responses, Messages,
// batch lines, prompt completions).
//
// Cheap by construction: an input's tokens are never more than its
// bytes (tokenest.Fits), so a body no longer than a window in bytes
// fits it without tokenizing; only a body larger than some target's
// window is tokenized, once per distinct body and vocabulary, and the
// count stops once it exceeds the largest window it is compared with.

// preflightOp reports whether op's input is checked against a window:
// the generation calls. Embeddings limit each input separately, and a
// token count is asked precisely of inputs that may not fit.
func preflightOp(op providers.Operation) bool {
	switch op {
	case providers.OpChat, providers.OpCompletions, providers.OpResponses, providers.OpMessages:
		return true
	}
	return false
}

// preflight marks the leaves of q whose context window its input
// exceeds.
func preflight(q *Request, cat *cost.Catalog) {
	if cat == nil {
		return
	}
	type check struct {
		p      *attemptPlan
		window int64
		enc    tokenest.Encoding
	}
	var buf [4]check
	checks := buf[:0]
	var limit int64
	for i := range q.attempts {
		p := &q.attempts[i]
		if p.err != nil || p.target.Unfit != nil || !preflightOp(p.op) {
			continue
		}
		w, ok := cat.Window(p.target.Settings.Provider, p.model)
		if !ok || tokenest.Fits(p.body, w) {
			continue
		}
		checks = append(checks, check{p: p, window: w, enc: tokenest.EncodingFor(p.model)})
		limit = max(limit, w)
	}
	if len(checks) == 0 {
		return
	}
	// Targets share a body unless override_params, a prompt or the
	// adapter made one of their own: count each distinct one once.
	type counted struct {
		body *byte
		size int
		enc  tokenest.Encoding
		n    int64
	}
	var memo []counted
	for _, c := range checks {
		body := unsafe.SliceData(c.p.body)
		n := int64(-1)
		for _, m := range memo {
			if m.body == body && m.size == len(c.p.body) && m.enc == c.enc {
				n = m.n
				break
			}
		}
		if n < 0 {
			n = tokenest.Count(c.p.body, c.enc, limit)
			memo = append(memo, counted{body: body, size: len(c.p.body), enc: c.enc, n: n})
		}
		if n > c.window {
			c.p.target.Unfit = &routing.Unfit{Model: c.p.model, Tokens: n, Window: c.window}
		}
	}
}
