package budgets

import (
	"context"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestChargeAddsCallsToTheRequestsLimits: a call made for an admitted
// request (the semantic cache's embedding) is charged to the limits the
// request was admitted on, in each limit's unit, after the request
// itself settled; unknown or failed calls charge nothing.
func TestChargeAddsCallsToTheRequestsLimits(t *testing.T) {
	ctx := context.Background()
	embedding := &observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 5, TotalTokens: 5}, CostUSD: 0.0000021, CostKnown: true}
	for _, tc := range []struct {
		name      string
		typ       string
		call      *observe.Entry
		wantSpent int64 // after the request's 1,000,000 nano-dollars (or 20 tokens)
	}{
		{"cost limit: the call's cost, to the nano-dollar", policies.TypeCost, embedding, 1_000_000 + 2_100},
		{"token limit: the call's tokens", policies.TypeTokens, embedding, 20 + 5},
		{"unpriced call: nothing on a cost limit", policies.TypeCost, &observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 5}}, 1_000_000},
		{"failed call without usage: nothing", policies.TypeTokens, &observe.Entry{Status: 503}, 20},
		{"no call", policies.TypeCost, nil, 1_000_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := costLimit(t, 1, nil)
			if tc.typ == policies.TypeTokens {
				u.Type, u.CreditLimit = policies.TypeTokens, 1_000
				if err := u.Prepare(); err != nil {
					t.Fatal(err)
				}
			}
			e := NewEnforcer(policies.NewMemoryLimiter(), fixedSource{u}, nil, nil)
			adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 5_000_000, Tokens: 100})
			if err != nil || refusal != nil {
				t.Fatalf("admit: %v %v", err, refusal)
			}
			charge := adm.Charge()
			if err := adm.Settle(ctx, costing(0.001)); err != nil {
				t.Fatal(err)
			}
			if err := charge.Add(ctx, tc.call); err != nil {
				t.Fatal(err)
			}
			per := u.PeriodAt(e.now())
			spent, err := e.Spent(ctx, u, counterKey(u, u.Policy().GroupKey(attrs("k")), per.Label), per)
			if err != nil {
				t.Fatal(err)
			}
			if spent != tc.wantSpent {
				t.Errorf("spent %d, want %d", spent, tc.wantSpent)
			}
		})
	}
	// A request no limit applied to has no charge, and a nil charge
	// charges nothing.
	var none *Admission
	if c := none.Charge(); c != nil || c.Add(ctx, embedding) != nil {
		t.Error("a request without limits has a charge")
	}
}
