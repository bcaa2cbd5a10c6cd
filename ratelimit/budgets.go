package ratelimit

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
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

// groupNoter is the app's record of the groups usage limits count, which
// the budget gauges read (app.NoteBudgetGroups).
type groupNoter interface {
	NoteBudgetGroups(ctx context.Context, a *policies.Attributes)
}

// admitBudget reserves r on the usage limits that match it (budget) and
// writes the refusal when there is one; false when r may not proceed.
func (h *Handler) admitBudget(w http.ResponseWriter, r *http.Request, c *requester, v *verdict) (*budgets.Charge, bool) {
	charge, refusal, ok := h.budget(w.Header(), r, c, v, nil)
	if refusal != nil {
		writeError(w, r, refusal)
	}
	return charge, ok
}

// budget reserves r on the usage limits that match it, with the same
// request description and estimates the rate limits use, after the rate
// limits admitted it (their grants are v's; nil for the budget stage).
// body, when not nil, is the body llm_gateway already read (r's is spent).
// It sets the binding limit's headers on hdr and settles the reservations
// when the gateway reports the outcome. ok says r's usage limits were
// applied (the caller marks r so, handoff.State.MarkBudgeted, and
// llm_gateway does not reserve it a second time); charge is then the
// admission's, nil when no limit applied. When a budget is spent, or the
// budget store is down and the gateway fails closed, it gives back v's
// grants and returns the refusal; when the client left meanwhile it
// returns nil and false.
func (h *Handler) budget(hdr http.Header, r *http.Request, c *requester, v *verdict, body []byte) (charge *budgets.Charge, refusal *apierror.Error, ok bool) {
	bc, isBudgeter := h.ctl.(budgeter)
	if !isBudgeter {
		return nil, nil, true
	}
	if h.ctl.ControlPlane().Owns(r.Method, r.URL.Path) {
		return nil, nil, true // as for rate limits: management APIs are never limited
	}
	if !canSpend(r) {
		return nil, nil, true
	}
	e := bc.BudgetEnforcer()
	ctx := r.Context()
	if !e.Enabled(ctx) {
		return nil, nil, true
	}
	id, known := c.identity()
	if !known {
		return nil, nil, true // the gateway answers 401
	}
	if body != nil {
		if _, read := ingress.Body(r); !read {
			ingress.SetBody(r, body) // the gateway read it: readBody reads it here
		}
	}
	q := request{r: r, h: h, id: id}
	q.attrs.WorkspaceID, q.attrs.OrganisationID, q.attrs.APIKey = id.WorkspaceID, id.OrganisationID, id.Name
	q.attrs.Pending = policies.PendingRouting | policies.PendingMetadata | policies.PendingModel
	q.fill(policies.PendingRouting | policies.PendingMetadata)
	h.readBody(&q)
	// A usage limit has no reservation setting of its own: it reserves
	// what a tokens or cost policy without default_reservation would.
	var none policies.Policy
	res := budgets.Reserve{NanoUSD: budgets.NanoUSD(h.estimateSpend(&q, &none)), Tokens: h.reserveTokens(&q, &none)}
	adm, refused, err := e.Admit(ctx, &q.attrs, res)
	if n, ok := h.ctl.(groupNoter); ok && (adm != nil || refused != nil) {
		n.NoteBudgetGroups(ctx, &q.attrs)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, false
		}
		h.logFailure("usage limit admission failed", err)
		if !h.ctl.FailClosed() {
			return adm.Charge(), nil, true
		}
		if v != nil {
			h.refund(ctx, v.id, v.grants)
		}
		return nil, apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable,
			"the budget store is unavailable; try again later").WithCode("budget_store_unavailable"), false
	}
	if refused != nil {
		if v != nil {
			h.refund(ctx, v.id, v.grants)
		}
		h.logger.Info("request refused by a spent usage limit", zap.String("api_key_name", id.Name),
			zap.String("workspace_id", id.WorkspaceID), zap.String("reason", refused.Message))
		return nil, refused, false
	}
	if g := adm.Binding(); g != nil {
		// The binding limit's remaining budget, so a client can see it
		// run out before its 412.
		hdr.Set(hdrBudgetRemaining, g.RemainingText())
		hdr.Set(hdrBudgetPolicy, g.Limit.ID)
		if !g.Period.End.IsZero() {
			hdr.Set(hdrBudgetReset, g.Period.End.UTC().Format(time.RFC3339))
		}
	}
	if adm != nil {
		sctx := context.WithoutCancel(ctx)
		// A copy for the callback, so adm itself stays off the heap on
		// the path where no limit exists.
		settle := adm
		observe.OnDone(r, func(entry *observe.Entry) {
			if err := settle.Settle(sctx, entry); err != nil {
				h.logFailure("usage limit settlement failed", err)
			}
		})
	}
	return adm.Charge(), nil, true
}

// BudgetStage is the usage-limit stage llm_gateway loads (module
// llm.stages.budget, app.BudgetStageModule) and runs for a request that
// no llm_ratelimit admitted: a route without llm_ratelimit, or a managed
// batch line whose route had none. It applies only the usage limits,
// described and estimated as llm_ratelimit describes a request (with the
// default output reservation, DefaultOutputTokens), and no rate-limit
// policy.
type BudgetStage struct {
	h Handler
}

// CaddyModule returns the Caddy module information.
func (BudgetStage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  app.BudgetStageModule,
		New: func() caddy.Module { return new(BudgetStage) },
	}
}

// Provision finds the llm app.
func (s *BudgetStage) Provision(ctx caddy.Context) error {
	_, err := s.h.provisionBase(ctx)
	return err
}

// AdmitBudget implements app.BudgetStage. body is the request body the
// gateway read, which the estimate reads in place of r's.
func (s *BudgetStage) AdmitBudget(hdr http.Header, r *http.Request, id *identity.Caller, body []byte) (*budgets.Charge, error) {
	charge, refusal, ok := s.h.budget(hdr, r, &requester{id: id, done: true}, nil, body)
	switch {
	case refusal != nil:
		return nil, refusal
	case !ok:
		return nil, apierror.New(statusClientClosed, apierror.TypeUnavailable, "the client closed the request").WithCode("client_closed")
	}
	return charge, nil
}

// statusClientClosed is what the log records of a request whose client
// left while its budget was decided (llm_gateway's StatusClientClosed).
const statusClientClosed = 499

// canSpend reports whether r can cost money or tokens itself: every
// POST or PUT but a file upload, a batch's creation (each of its lines is
// admitted on the usage limits as it runs, and refused there when they
// are spent) and a batch's or a response's cancellation; and any
// WebSocket upgrade (a session that streams model calls). A read or a
// delete (the models list, a batch's status and results, files) costs
// nothing, so a spent usage limit never refuses it: a team out of money
// can still collect the results it paid for.
func canSpend(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		return r.Header.Get("Upgrade") != ""
	}
	p := r.URL.Path
	if strings.HasSuffix(p, "/cancel") && (strings.Contains(p, "/batches/") || strings.Contains(p, "/responses/")) {
		return false
	}
	for _, free := range [...]string{"/v1/files", "/v1/uploads", "/v1/batches"} {
		if strings.HasSuffix(p, free) {
			return false
		}
	}
	return !strings.Contains(p, "/v1/uploads/")
}
