package budgets

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// TestLostCountersAreRebuiltFromTheLedger: a budget whose counter store
// lost its counters (a fresh limiter) is raised, on first use, to what
// the ledger recorded for the group since the limit was created, so a
// nearly spent budget stays nearly spent.
func TestLostCountersAreRebuiltFromTheLedger(t *testing.T) {
	ctx := context.Background()
	db, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	u := costLimit(t, 0.35, nil)
	u.WorkspaceID, u.OrganisationID, u.CreatedAt = "ws", "org", now.Add(-48*time.Hour)
	rec := func(key string, at time.Time, usd float64) ledger.Record {
		return ledger.Record{Time: at, Workspace: "ws", Organisation: "org", APIKey: key, Status: 200,
			CostKnown: true, CostNanoUSD: ledger.NanoFromUSD(usd)}
	}
	if err := db.Insert(ctx, []ledger.Record{
		rec("k", now.Add(-time.Hour), 0.10), rec("k", now.Add(-2*time.Hour), 0.20),
		rec("k", now.Add(-72*time.Hour), 5),  // before the limit existed
		rec("other", now.Add(-time.Hour), 9), // another group
	}); err != nil {
		t.Fatal(err)
	}
	e := NewEnforcer(policies.NewMemoryLimiter(policies.WithClock(clock)), fixedSource{u}, nil, clock)
	e.SetSeeder(LedgerSeeder{DB: db}, NewMemoryOnce(clock))
	adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 100_000_000})
	if err != nil || refusal != nil {
		t.Fatalf("admit: %v %v", refusal, err)
	}
	key := adm.Grants[0].Key
	if got := adm.Grants[0].Reserved; got != 50_000_000 {
		t.Errorf("reserved %d n$, want the 50000000 left after the ledger's 300000000", got)
	}
	spent, _ := e.Spent(ctx, u, key, u.PeriodAt(now))
	if spent != 350_000_000 {
		t.Errorf("counter %d n$, want 300000000 rebuilt + 50000000 reserved", spent)
	}
	// The marker is set: settling and admitting again does not add the
	// ledger a second time.
	adm.Settle(ctx, costing(0.05))
	now = now.Add(time.Minute)
	if _, refusal, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 1}); refusal == nil {
		t.Error("a spent budget admitted")
	}
	// A limit grouped by a key the ledger cannot filter on is not
	// rebuilt, rather than rebuilt wrong.
	odd := costLimit(t, 1, nil)
	odd.Conditions = []policies.Condition{{Key: policies.KeyModel, Value: "*"}}
	if _, ok, _ := (LedgerSeeder{DB: db}).Used(ctx, odd, attrs("k"), now.Add(-time.Hour), now); ok {
		t.Error("a condition on any model, not grouped, was rebuilt")
	}
}
