package ratelimit

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
)

// Response headers of a request a usage limit applied to: the remaining
// budget of the limit with the least left (in dollars or tokens), its id
// and when its period resets.
const (
	hdrBudgetRemaining = "x-gateway-budget-remaining"
	hdrBudgetPolicy    = "x-gateway-budget-policy"
	hdrBudgetReset     = "x-gateway-budget-reset"
)

// budgeter is what the app offers for usage limits (package budgets):
// the enforcer that reserves on them.
type budgeter interface {
	BudgetEnforcer() *budgets.Enforcer
}

// admitBudget reserves r on the usage limits that match it, with the
// same request description and estimates the rate limits use, after the
// rate limits admitted it (their grants are v's). It settles the
// reservations when the gateway reports the outcome. When a budget is
// spent it gives back v's grants, writes the 412 and returns false.
func (h *Handler) admitBudget(w http.ResponseWriter, r *http.Request, c *requester, v *verdict) bool {
	bc, ok := h.ctl.(budgeter)
	if !ok {
		return true
	}
	if _, completion := prompts.CompletionsRef(r.URL.Path); !completion && controlplane.Owns(r.URL.Path) {
		return true // as for rate limits: management APIs are never limited
	}
	e := bc.BudgetEnforcer()
	ctx := r.Context()
	if !e.Enabled(ctx) {
		return true
	}
	id, ok := c.identity()
	if !ok {
		return true // the gateway answers 401
	}
	q := request{r: r, h: h}
	q.attrs.WorkspaceID, q.attrs.OrganisationID, q.attrs.APIKey = id.WorkspaceID, id.OrganisationID, id.Name
	q.attrs.Pending = policies.PendingRouting | policies.PendingMetadata | policies.PendingModel
	q.fill(policies.PendingRouting | policies.PendingMetadata)
	h.readBody(&q)
	// A usage limit has no reservation setting of its own: it reserves
	// what a tokens or cost policy without default_reservation would.
	var none policies.Policy
	res := budgets.Reserve{MicroUSD: h.reserveSpend(&q, &none), Tokens: h.reserveTokens(&q, &none)}
	adm, refusal, err := e.Admit(ctx, &q.attrs, res)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		h.logFailure("usage limit admission failed", err)
		if !h.ctl.FailClosed() {
			return true
		}
		if v != nil {
			h.refund(ctx, v.grants)
		}
		writeError(w, r, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable,
			"the budget store is unavailable; try again later").WithCode("budget_store_unavailable"))
		return false
	}
	if refusal != nil {
		if v != nil {
			h.refund(ctx, v.grants)
		}
		h.logger.Info("request refused by a spent usage limit", zap.String("api_key_name", id.Name),
			zap.String("workspace_id", id.WorkspaceID), zap.String("reason", refusal.Message))
		writeError(w, r, refusal)
		return false
	}
	if g := adm.Binding(); g != nil {
		// The binding limit's remaining budget, so a client can see it
		// run out before its 412.
		hdr := w.Header()
		hdr.Set(hdrBudgetRemaining, g.RemainingText())
		hdr.Set(hdrBudgetPolicy, g.Limit.ID)
		if !g.Period.End.IsZero() {
			hdr.Set(hdrBudgetReset, g.Period.End.UTC().Format(time.RFC3339))
		}
	}
	if adm != nil {
		sctx := context.WithoutCancel(ctx)
		observe.OnDone(r, func(entry *observe.Entry) {
			if err := adm.Settle(sctx, entry); err != nil {
				h.logFailure("usage limit settlement failed", err)
			}
		})
	}
	return true
}
