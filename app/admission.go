package app

import (
	"net/http"
	"sync"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// Admission is the rate-limit stage a request the gateway starts itself
// (a managed batch line) passes before it runs, as a client's request
// passes llm_ratelimit in front of llm_gateway. Each provisioned
// llm_ratelimit handler registers one under a key derived from its
// Caddyfile policies, so the same Caddyfile gives the same key across
// reloads and restarts.
type Admission interface {
	// Admit decides whether r, made by id, may run. When it may not, it
	// has written the answer (429, or 503 when the limiter is down and
	// the gateway fails closed) to w and returns false. When it may, the
	// settlement of token policies is registered on r (observe.OnDone),
	// so it runs once the request is done, and r's handed-on state
	// (handoff.From, set by the gateway's clientless run) is marked as
	// admitted on its usage limits.
	Admit(w http.ResponseWriter, r *http.Request, id *identity.Caller) bool
}

// APIAdmissionKey names the stage that enforces only the policies created
// through the API: the one a batch line uses when the route it was
// created on no longer exists in the running config.
const APIAdmissionKey = "api"

// admissions is the registry of Admission stages of one config.
type admissions struct {
	mu sync.RWMutex
	m  map[string]Admission
}

// RegisterAdmission makes a stage findable by key until release is
// called. A later registration under the same key (another route with
// the same policies) replaces it; release then leaves it in place.
// The app must be provisioned.
func (a *App) RegisterAdmission(key string, s Admission) (release func()) {
	r := a.admissions
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]Admission)
	}
	r.m[key] = s
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.m[key] == s {
			delete(r.m, key)
		}
	}
}

// Admission returns the stage registered under key; for a key no longer
// registered (the route changed), the API-policies stage when there is
// one. ok is false for the empty key (a route without llm_ratelimit) and
// when the config has no llm_ratelimit at all.
func (a *App) Admission(key string) (s Admission, ok bool) {
	r := a.admissions
	if key == "" || r == nil {
		return nil, false // the route had no llm_ratelimit
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok = r.m[key]; ok {
		return s, true
	}
	s, ok = r.m[APIAdmissionKey]
	return s, ok
}

// BudgetStage is the usage-limit stage (package budgets) llm_gateway runs
// itself for a request no llm_ratelimit admitted, so a budget holds on
// every route, with or without llm_ratelimit. Package ratelimit provides
// it as the Caddy module BudgetStageModule, since it describes a request
// (routing, metadata, model, the token and cost estimate) exactly as
// llm_ratelimit does.
type BudgetStage interface {
	// AdmitBudget reserves r, made by id with body, on the usage limits
	// that match it, sets the binding limit's headers on h and registers
	// the settlement (observe.OnDone). charge bills calls made on r's
	// behalf to those limits (nil when none applied). A non-nil error is
	// the answer: the 412 of a spent budget, or a 503 when the budget
	// store is down and the gateway fails closed.
	AdmitBudget(h http.Header, r *http.Request, id *identity.Caller, body []byte) (charge *budgets.Charge, err error)
}

// BudgetStageModule is the Caddy module id of the BudgetStage that
// llm_gateway loads.
const BudgetStageModule = "llm.stages.budget"
