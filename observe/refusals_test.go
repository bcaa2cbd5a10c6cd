package observe

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// TestRefusalOf maps the gateway's own error codes to refusal reasons;
// errors that refuse nothing (a bad request, a provider's failure, a
// code-less error) have none.
func TestRefusalOf(t *testing.T) {
	tests := []struct {
		status int
		code   any
		want   string
	}{
		{412, "budget_exceeded", RefusalBudgetExhausted},
		{429, "rate_limit_exceeded", RefusalRateLimited},
		{503, "budget_store_unavailable", RefusalStoreUnavailable},
		{503, "rate_limiter_unavailable", RefusalStoreUnavailable},
		{503, "store_unavailable", RefusalStoreUnavailable},
		{401, "invalid_api_key", RefusalUnauthenticated},
		{403, "model_not_allowed", RefusalModelNotAllowed},
		{503, "held_budget_exceeded", RefusalOverloaded},
		{400, "request_too_large", ""},
		{502, "upstream_unreachable", ""},
		{500, nil, ""},
		{429, 42, ""},
	}
	for _, tt := range tests {
		e := apierror.New(tt.status, apierror.TypeServer, "x")
		e.Code = tt.code
		if got := RefusalOf(e); got != tt.want {
			t.Errorf("RefusalOf(%d %v) = %q, want %q", tt.status, tt.code, got, tt.want)
		}
	}
	if RefusalOf(nil) != "" {
		t.Error("RefusalOf(nil) is a refusal")
	}
}

// TestEntryCountsItsRefusalOnce: recording an entry counts its refusal
// once under its reason, and an entry without one (or with a reason out
// of the set) counts none.
func TestEntryCountsItsRefusalOnce(t *testing.T) {
	before := map[string]float64{}
	for _, r := range RefusalReasons {
		before[r] = testutil.ToFloat64(refusalsTotal.WithLabelValues(r))
	}
	for _, e := range []*Entry{
		{Status: http.StatusPreconditionFailed, Refusal: RefusalBudgetExhausted},
		{Status: 446, Refusal: RefusalGuardrailDenied},
		{Status: 446, Refusal: RefusalGuardrailDenied},
		{Status: 200},
		{Status: 503, Refusal: "made_up"},
	} {
		e.record(time.Now())
	}
	RecordRefusal(RefusalRateLimited)
	want := map[string]float64{RefusalBudgetExhausted: 1, RefusalGuardrailDenied: 2, RefusalRateLimited: 1}
	for _, r := range RefusalReasons {
		if got := testutil.ToFloat64(refusalsTotal.WithLabelValues(r)) - before[r]; got != want[r] {
			t.Errorf("%s grew by %v, want %v", r, got, want[r])
		}
	}
	if n := testutil.CollectAndCount(refusalsTotal); n != len(RefusalReasons) {
		t.Errorf("%d refusal series, want one per reason (%d)", n, len(RefusalReasons))
	}
}
