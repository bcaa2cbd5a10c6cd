package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Refusal reasons: why the gateway itself turned a request away, the
// reason label of llm_gateway_refusals_total. The set is fixed; a
// gateway error that is none of these (a bad request, a provider's
// failure) is not a refusal.
const (
	// RefusalBudgetExhausted: a usage limit is spent (412
	// budget_exceeded).
	RefusalBudgetExhausted = "budget_exhausted"
	// RefusalRateLimited: a rate-limit policy refused (429
	// rate_limit_exceeded).
	RefusalRateLimited = "rate_limited"
	// RefusalGuardrailDenied: a guardrail denied the request or withheld
	// the answer (446).
	RefusalGuardrailDenied = "guardrail_denied"
	// RefusalStoreUnavailable: a store the request needs is down and the
	// gateway fails closed (503 budget_store_unavailable,
	// rate_limiter_unavailable, store_unavailable).
	RefusalStoreUnavailable = "store_unavailable"
	// RefusalUnauthenticated: no valid gateway key (401
	// invalid_api_key).
	RefusalUnauthenticated = "unauthenticated"
	// RefusalModelNotAllowed: the key may not use the model (403
	// model_not_allowed).
	RefusalModelNotAllowed = "model_not_allowed"
	// RefusalOverloaded: the gateway holds as many provider answers as
	// it may (503 held_budget_exceeded).
	RefusalOverloaded = "overloaded"
)

// RefusalReasons lists every reason, in the order the docs give them.
var RefusalReasons = []string{
	RefusalBudgetExhausted, RefusalRateLimited, RefusalGuardrailDenied, RefusalStoreUnavailable,
	RefusalUnauthenticated, RefusalModelNotAllowed, RefusalOverloaded,
}

// refusalCodes maps the codes of the gateway's own error answers to the
// reason they refuse for. The codes are those the refusing packages set
// (budgets.CodeExceeded, ratelimit's, app's); observe cannot import them,
// TestRefusalCodesAreTheirPackages and the integration tests check they match.
var refusalCodes = map[string]string{
	"budget_exceeded":          RefusalBudgetExhausted,
	"rate_limit_exceeded":      RefusalRateLimited,
	"budget_store_unavailable": RefusalStoreUnavailable,
	"rate_limiter_unavailable": RefusalStoreUnavailable,
	"store_unavailable":        RefusalStoreUnavailable,
	"invalid_api_key":          RefusalUnauthenticated,
	"model_not_allowed":        RefusalModelNotAllowed,
	"held_budget_exceeded":     RefusalOverloaded,
}

// RefusalOf returns the reason e refuses its request for, or "" when e
// is no refusal.
func RefusalOf(e *apierror.Error) string {
	if e == nil {
		return ""
	}
	code, _ := e.Code.(string)
	return refusalCodes[code]
}

// refusalsTotal counts refusals by reason. Every reason is a child from
// the start, so a dashboard shows 0 rather than no data.
var refusalsTotal = func() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_refusals_total",
		Help: "Requests the gateway itself refused, by reason (budget_exhausted, rate_limited, guardrail_denied, store_unavailable, unauthenticated, model_not_allowed, overloaded); llm_gateway and llm_ratelimit alike.",
	}, []string{"reason"})
	for _, r := range RefusalReasons {
		c.WithLabelValues(r)
	}
	return c
}()

// refusalCounters are the reasons' children, so counting one is a map
// read.
var refusalCounters = func() map[string]prometheus.Counter {
	m := make(map[string]prometheus.Counter, len(RefusalReasons))
	for _, r := range RefusalReasons {
		m[r] = refusalsTotal.WithLabelValues(r)
	}
	return m
}()

// RecordRefusal counts one refusal. The entry of a request llm_gateway
// answered counts its own (Entry.Refusal), when it is logged; a handler
// that answers without an entry (llm_ratelimit) calls this where it
// writes the refusal. A reason outside the set is not counted.
func RecordRefusal(reason string) {
	if c, ok := refusalCounters[reason]; ok {
		c.Inc()
	}
}
