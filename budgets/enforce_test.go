package budgets

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// fixedSource serves the given limits.
type fixedSource []*UsageLimit

func (s fixedSource) Active(context.Context) ([]*UsageLimit, error) { return s, nil }

func costLimit(t testing.TB, dollars float64, alert *float64) *UsageLimit {
	t.Helper()
	u := &UsageLimit{Type: policies.TypeCost, CreditLimit: dollars, AlertThreshold: alert, PeriodicReset: ResetMonthly,
		Conditions: []policies.Condition{{Key: policies.KeyAPIKey, Value: "*"}},
		GroupBy:    []policies.GroupBy{{Key: policies.KeyAPIKey}}}
	if err := u.Prepare(); err != nil {
		t.Fatal(err)
	}
	return u
}

func attrs(key string) *policies.Attributes {
	return &policies.Attributes{WorkspaceID: "ws", OrganisationID: "org", APIKey: key}
}

// costing is the finished entry of a request that cost usd.
func costing(usd float64) *observe.Entry {
	return &observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 10, CompletionTokens: 10}, CostUSD: usd, CostKnown: true}
}

func TestSpentBudgetIsRefusedWith412(t *testing.T) {
	u := costLimit(t, 0.05, nil)
	e := NewEnforcer(policies.NewMemoryLimiter(), fixedSource{u}, nil, nil)
	ctx := context.Background()
	admitted := 0
	for i := 0; i < 10; i++ {
		adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 20_000_000})
		if err != nil {
			t.Fatal(err)
		}
		if refusal != nil {
			if refusal.Status != 412 || refusal.Code != CodeExceeded {
				t.Fatalf("refusal %+v, want 412 %s", refusal, CodeExceeded)
			}
			break
		}
		admitted++
		if err := adm.Settle(ctx, costing(0.01)); err != nil {
			t.Fatal(err)
		}
	}
	if admitted != 5 {
		t.Errorf("admitted %d requests of $0.01 against $0.05, want 5", admitted)
	}
	// Another group (key) has its own budget.
	if _, refusal, _ := e.Admit(ctx, attrs("other"), Reserve{NanoUSD: 20_000_000}); refusal != nil {
		t.Errorf("another key was refused: %v", refusal)
	}
	// A request that does not match is not counted.
	if adm, refusal, _ := e.Admit(ctx, &policies.Attributes{WorkspaceID: "ws"}, Reserve{NanoUSD: 1}); adm != nil || refusal != nil {
		t.Errorf("a request without an api key matched")
	}
}

func TestNextPeriodStartsAfresh(t *testing.T) {
	now := time.Date(2026, 3, 31, 21, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	u := costLimit(t, 0.01, nil)
	e := NewEnforcer(policies.NewMemoryLimiter(policies.WithClock(clock)), fixedSource{u}, nil, clock)
	ctx := context.Background()
	adm, refusal, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 10_000_000})
	if refusal != nil {
		t.Fatal(refusal)
	}
	adm.Settle(ctx, costing(0.01))
	if _, refusal, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 10_000_000}); refusal == nil {
		t.Fatal("a spent budget admitted")
	}
	now = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	if _, refusal, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 10_000_000}); refusal != nil {
		t.Errorf("the new month's budget refused: %v", refusal)
	}
}

func TestUnknownOutcomeKeepsTheReservation(t *testing.T) {
	u := costLimit(t, 1, nil)
	e := NewEnforcer(policies.NewMemoryLimiter(), fixedSource{u}, nil, nil)
	ctx := context.Background()
	adm, _, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 300_000_000})
	// A success without usage (a stream the client left before its
	// usage chunk) is charged its reservation.
	adm.Settle(ctx, &observe.Entry{Status: 200})
	spent, _ := e.Spent(ctx, u, adm0Key(t, e, u), u.PeriodAt(time.Now()))
	if spent != 300_000_000 {
		t.Errorf("spent %d, want the 300000000 reserved", spent)
	}
	adm, _, _ = e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 300_000_000})
	// A failed request without usage is charged nothing.
	adm.Settle(ctx, &observe.Entry{Status: 502})
	spent, _ = e.Spent(ctx, u, adm0Key(t, e, u), u.PeriodAt(time.Now()))
	if spent != 300_000_000 {
		t.Errorf("spent %d after a failure, want 300000000", spent)
	}
}

func adm0Key(t *testing.T, e *Enforcer, u *UsageLimit) string {
	return counterKey(u, u.Policy().GroupKey(attrs("k")), u.PeriodAt(e.now()).Label)
}

// TestBudgetHoldsUnderConcurrencyAcrossInstances is the target at
// the enforcement layer: three instances (enforcers) share one counter
// store, 200 concurrent requests of $0.01 each reserve $0.02 against a
// $1.00 budget; settled spend ends at most one request past the budget
// and at least 95 requests succeed.
func TestBudgetHoldsUnderConcurrencyAcrossInstances(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limiter func(t *testing.T) policies.Limiter
	}{
		{"memory", func(*testing.T) policies.Limiter { return policies.NewMemoryLimiter() }},
		{"redis", func(t *testing.T) policies.Limiter {
			c := redistest.Client(t, 0)
			return policies.NewRedisLimiter(c, policies.WithKeyPrefix("llm:test-budget:"+t.Name()+time.Now().Format(time.RFC3339Nano)+":"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := tc.limiter(t)
			u := costLimit(t, 1.00, nil)
			var instances [3]*Enforcer
			for i := range instances {
				instances[i] = NewEnforcer(lim, fixedSource{u}, nil, nil)
			}
			ctx := context.Background()
			var ok, refused atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 200; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e := instances[i%3]
					adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 20_000_000})
					if err != nil {
						t.Error(err)
						return
					}
					if refusal != nil {
						refused.Add(1)
						return
					}
					ok.Add(1)
					if err := adm.Settle(ctx, costing(0.01)); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			spent, err := instances[0].Spent(ctx, u, adm0Key(t, instances[0], u), u.PeriodAt(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d succeeded, %d refused, settled spend $%.6f of $1.00", tc.name, ok.Load(), refused.Load(), float64(spent)/NanoPerUSD)
			if spent > 1_010_000_000 {
				t.Errorf("settled spend %d n$ exceeds the budget plus one request", spent)
			}
			if ok.Load() < 95 {
				t.Errorf("only %d requests succeeded, want at least 95", ok.Load())
			}
			if spent != ok.Load()*10_000_000 {
				t.Errorf("settled spend %d n$ is not the %d successes' cost", spent, ok.Load())
			}
		})
	}
}

func TestAlertFiresOncePerPeriod(t *testing.T) {
	var calls atomic.Int64
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body.Store(string(b))
		calls.Add(1)
	}))
	defer srv.Close()
	now := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	threshold := 0.03
	u := costLimit(t, 0.10, &threshold)
	al := NewAlerter(srv.URL, srv.Client(), NewMemoryOnce(clock), nil)
	e := NewEnforcer(policies.NewMemoryLimiter(policies.WithClock(clock)), fixedSource{u}, al, clock)
	ctx := context.Background()
	for i := 0; i < 8; i++ {
		adm, refusal, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 10_000_000})
		if refusal != nil {
			t.Fatal(refusal)
		}
		adm.Settle(ctx, costing(0.01))
	}
	al.Wait()
	if calls.Load() != 1 {
		t.Fatalf("%d alerts in one period, want 1", calls.Load())
	}
	now = time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 4; i++ {
		adm, _, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 10_000_000})
		adm.Settle(ctx, costing(0.01))
	}
	al.Wait()
	if calls.Load() != 2 {
		t.Errorf("%d alerts after the next period passed its threshold, want 2", calls.Load())
	}
	t.Log(body.Load())
}

func TestStoreRoundTrip(t *testing.T) {
	s := NewStore(&certmagic.FileStorage{Path: t.TempDir()}, nil)
	ctx := context.Background()
	u := costLimit(t, 5, nil)
	const ws, org = "6f1c2b8e-0a4d-4c5e-9f7a-1b2c3d4e5f60", "0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f50"
	u.WorkspaceID, u.OrganisationID = ws, org
	if err := s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	active, err := s.Active(ctx)
	a := &policies.Attributes{WorkspaceID: ws, OrganisationID: org, APIKey: "k"}
	if err != nil || len(active) != 1 || active[0].Policy() == nil || !active[0].Policy().Matches(a) {
		t.Fatalf("active %v, err %v", active, err)
	}
	list, _ := s.List(ctx, ws, org)
	other, _ := s.List(ctx, "ws2", org)
	if len(list) != 1 || len(other) != 0 {
		t.Errorf("workspace ws lists %d, ws2 %d; want 1 and 0", len(list), len(other))
	}
	got, err := s.Get(ctx, u.ID)
	if err != nil || got.CreditLimit != 5 || got.Object != ObjectUsageLimits {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := s.Delete(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if active, _ := s.Active(ctx); len(active) != 0 {
		t.Errorf("a deleted limit is still active")
	}
	if _, err := s.Get(ctx, u.ID); err != ErrNotFound {
		t.Errorf("get after delete: %v", err)
	}
}

func TestPrepareRefusesBadLimits(t *testing.T) {
	neg := -1.0
	for _, tc := range []struct {
		name  string
		u     UsageLimit
		field string
	}{
		{"no type", UsageLimit{CreditLimit: 1}, "type"},
		{"requests type", UsageLimit{Type: "requests", CreditLimit: 1}, "type"},
		{"zero credit", UsageLimit{Type: "cost"}, "credit_limit"},
		{"huge credit", UsageLimit{Type: "cost", CreditLimit: 1e12}, "credit_limit"},
		{"negative alert", UsageLimit{Type: "cost", CreditLimit: 1, AlertThreshold: &neg}, "alert_threshold"},
		{"daily reset", UsageLimit{Type: "cost", CreditLimit: 1, PeriodicReset: "daily"}, "periodic_reset"},
		{"bad zone", UsageLimit{Type: "cost", CreditLimit: 1, Timezone: "Mars/Olympus"}, "timezone"},
		{"no conditions", UsageLimit{Type: "cost", CreditLimit: 1, GroupBy: []policies.GroupBy{{Key: "api_key"}}}, "conditions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.u.Prepare()
			fe, ok := err.(*policies.FieldError)
			if !ok || fe.Field != tc.field {
				t.Errorf("error %v, want one on %s", err, tc.field)
			}
		})
	}
}
