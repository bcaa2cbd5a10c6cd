package observe_test

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// TestRefusalCodesAreTheirPackages: the budget refusal's code, defined
// by package budgets, is the one observe counts as budget_exhausted.
func TestRefusalCodesAreTheirPackages(t *testing.T) {
	e := apierror.New(412, apierror.TypeRateLimit, "spent").WithCode(budgets.CodeExceeded)
	if got := observe.RefusalOf(e); got != observe.RefusalBudgetExhausted {
		t.Errorf("RefusalOf(%s) = %q", budgets.CodeExceeded, got)
	}
}
