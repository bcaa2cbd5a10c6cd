package ratelimit

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// limitSource serves fixed usage limits.
type limitSource []*budgets.UsageLimit

func (s limitSource) Active(context.Context) ([]*budgets.UsageLimit, error) { return s, nil }

// budgetControl is fakeControl with usage limits and prices.
type budgetControl struct {
	*fakeControl
	e *budgets.Enforcer
}

func (b budgetControl) BudgetEnforcer() *budgets.Enforcer { return b.e }
func (b budgetControl) Prices() *cost.Catalog             { return cost.Builtin() }

func newBudgetStage(t testing.TB, limits ...*budgets.UsageLimit) (*BudgetStage, budgetControl) {
	t.Helper()
	ctl := budgetControl{fakeControl: newControl()}
	ctl.e = budgets.NewEnforcer(ctl.limiter, limitSource(limits), nil, nil)
	ctl.e.MaxWait = 0
	return &BudgetStage{h: *newHandler(t, ctl)}, ctl
}

// dollarLimit is a usage limit of usd per gateway key.
func dollarLimit(t testing.TB, usd float64) *budgets.UsageLimit {
	t.Helper()
	u := &budgets.UsageLimit{ID: "budget-1", Type: policies.TypeCost, CreditLimit: usd, PeriodicReset: budgets.ResetMonthly,
		WorkspaceID: testWS, OrganisationID: testOrg,
		Conditions: []policies.Condition{{Key: policies.KeyAPIKey, Value: "*"}},
		GroupBy:    []policies.GroupBy{{Key: policies.KeyAPIKey}}}
	if err := u.Prepare(); err != nil {
		t.Fatal(err)
	}
	return u
}

// gatewayRead is a request whose body llm_gateway has already read, as
// the stage receives it.
func gatewayRead(t testing.TB) *http.Request {
	r := newRequest("", []byte(chatBody), "X-Gateway-Provider", "openai")
	if _, err := io.ReadAll(r.Body); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBudgetStage: the gateway's budget stage answers the charge of
// every request it admits (which the gateway keeps for the calls made on
// its behalf), reserves one a limit matches from the body the gateway read,
// refuses a spent budget with the 412, and settles on the outcome.
func TestBudgetStage(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limits     []*budgets.UsageLimit
		spent      float64 // dollars spent by an earlier request
		wantStatus int     // 0: admitted
		wantCharge bool
	}{
		{"no usage limit", nil, 0, 0, false},
		{"a budget with room", []*budgets.UsageLimit{dollarLimit(t, 1)}, 0, 0, true},
		{"a spent budget", []*budgets.UsageLimit{dollarLimit(t, 1)}, 1, http.StatusPreconditionFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctl := newBudgetStage(t, tc.limits...)
			if tc.spent > 0 {
				first := gatewayRead(t)
				if _, err := s.AdmitBudget(http.Header{}, first, testAlice, []byte(chatBody)); err != nil {
					t.Fatal(err)
				}
				observe.RunDone(first, &observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 1}, CostUSD: tc.spent, CostKnown: true})
			}
			r := gatewayRead(t)
			hdr := http.Header{}
			charge, err := s.AdmitBudget(hdr, r, testAlice, []byte(chatBody))
			if tc.wantStatus != 0 {
				if e := apierror.As(err); err == nil || e.Status != tc.wantStatus || e.Code != budgets.CodeExceeded {
					t.Fatalf("AdmitBudget: %v, want %d %s", err, tc.wantStatus, budgets.CodeExceeded)
				}
				return
			}
			if err != nil {
				t.Fatalf("AdmitBudget: %v", err)
			}
			if (charge != nil) != tc.wantCharge {
				t.Fatalf("charge %v; want charge %v", charge, tc.wantCharge)
			}
			if !tc.wantCharge {
				return
			}
			if hdr.Get(hdrBudgetPolicy) != "budget-1" || hdr.Get(hdrBudgetRemaining) == "" {
				t.Errorf("budget headers %v", hdr)
			}
			// The settlement charges the request's cost in place of the
			// reservation.
			observe.RunDone(r, &observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 9, CompletionTokens: 3}, CostUSD: 0.000042, CostKnown: true})
			st, err := ctl.e.Statuses(context.Background(), &policies.Attributes{APIKey: "alice", WorkspaceID: testWS, OrganisationID: testOrg})
			if err != nil || len(st) != 1 || st[0].Used != 0.000042 {
				t.Errorf("statuses %+v (%v), want 0.000042 used", st, err)
			}
		})
	}
}

// BenchmarkBudgetStageNoLimits is the stage's cost on a route without
// llm_ratelimit when no usage limit exists: what every request pays.
func BenchmarkBudgetStageNoLimits(b *testing.B) {
	s, _ := newBudgetStage(b)
	r := gatewayRead(b)
	body, hdr := []byte(chatBody), http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.AdmitBudget(hdr, r, testAlice, body); err != nil {
			b.Fatal(err)
		}
	}
}
