package handlers

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
)

// Usage limits (budgets) hold on every request the gateway sends to a
// provider, not only on routes with llm_ratelimit: a key's budget must
// not be escaped by a route, or a whole config, without it. llm_ratelimit
// reserves a request on its budgets before the gateway and marks it
// (handoff.State.MarkBudgeted); the gateway runs the budget stage itself, once
// the request is planned and before any provider call, for a request
// that carries no mark. So each request is reserved, and settled, exactly
// once.

// provisionBudget loads the budget stage (app.BudgetStageModule, which
// package ratelimit provides). A build without that package has none;
// admitBudget then refuses requests while usage limits exist rather than
// let them pass unlimited.
func (g *Gateway) provisionBudget(ctx caddy.Context) error {
	s, err := app.LoadBudgetStage(ctx)
	g.budget = s
	return err
}

// admitBudget reserves q on the usage limits that match it unless a
// stage in front (llm_ratelimit, or a batch line's admission) already did
// for this same caller (handoff.State.Budgeted). A refusal is the
// client's answer: 412 for a spent budget. q keeps the admission's charge
// for calls made on its behalf (the semantic cache's embeddings, which
// are recorded and charged as the caller's).
func (g *Gateway) admitBudget(r *http.Request, q *Request, f *flight) error {
	ctx := r.Context()
	if charge, done := handoff.From(ctx).Budgeted(g.app.Issuer(), q.Identity); done {
		q.charge = charge
		return nil
	}
	if g.budget == nil {
		if g.app.BudgetEnforcer().Enabled(ctx) {
			return apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable,
				"usage limits are configured but this build cannot enforce them").WithCode("budget_stage_missing")
		}
		return nil
	}
	charge, err := g.budget.AdmitBudget(f.out.w.Header(), r, q.Identity, q.Call.Body)
	q.charge = charge
	return err
}
