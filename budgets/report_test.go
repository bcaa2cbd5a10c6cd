package budgets

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// The workspaces and organisation of the report's test.
const (
	ws  = "1c7a4f81-4d5b-4b6a-8b62-7a8e8b2f3c02"
	ws2 = "2d8b5a92-5e6c-4c7b-9c73-8b9f9c3a4d03"
	org = "0b6f3e70-3c4a-4a59-9a51-6f7d7a1e2b01"
)

// limitOf is a prepared cost limit of $1 a month in workspace ws of org.
func limitOf(t *testing.T, name, ws, org string, cond []policies.Condition, groupBy ...string) *UsageLimit {
	t.Helper()
	u := &UsageLimit{Name: &name, Type: policies.TypeCost, CreditLimit: 1, PeriodicReset: ResetMonthly,
		WorkspaceID: ws, OrganisationID: org, Conditions: cond}
	for _, g := range groupBy {
		u.GroupBy = append(u.GroupBy, policies.GroupBy{Key: g})
	}
	if err := u.Prepare(); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestReportFindsEveryGroup: the report lists each group of each limit
// with what it spent, found from the members: a key-grouped limit has a
// group per member in its scope that meets its identity conditions
// (whatever its conditions on request attributes), a workspace-grouped
// one a single group, a limit on one virtual key that key's group, and
// a limit per model none (PerRequest). The spend is the enforcer's,
// charged through Admit and Settle.
func TestReportFindsEveryGroup(t *testing.T) {
	any := []policies.Condition{{Key: policies.KeyAPIKey, Value: "*"}}
	perKey := limitOf(t, "per-key", ws, org, any, policies.KeyAPIKey)
	onlyBob := limitOf(t, "bob", ws, org, []policies.Condition{{Key: policies.KeyAPIKey, Value: "bob"}}, policies.KeyAPIKey)
	gpt := limitOf(t, "gpt", ws, org, []policies.Condition{{Key: policies.KeyAPIKey, Value: "*"}, {Key: policies.KeyModel, Value: "gpt-4o"}}, policies.KeyAPIKey)
	perWS := limitOf(t, "per-ws", ws, org, any, policies.KeyWorkspaceID)
	vk := limitOf(t, "vk", ws, org, []policies.Condition{{Key: policies.KeyVirtualKey, Value: "vk1"}}, policies.KeyVirtualKey)
	perModel := limitOf(t, "per-model", ws, org, any, policies.KeyModel)
	elsewhere := limitOf(t, "elsewhere", ws2, org, any, policies.KeyAPIKey)
	limits := []*UsageLimit{perKey, onlyBob, gpt, perWS, vk, perModel, elsewhere}
	e := NewEnforcer(policies.NewMemoryLimiter(), fixedSource(limits), nil, nil)
	ctx := context.Background()
	spend := func(a *policies.Attributes, usd float64) {
		t.Helper()
		adm, refusal, err := e.Admit(ctx, a, Reserve{NanoUSD: 1})
		if err != nil || refusal != nil {
			t.Fatalf("admit: %v %v", err, refusal)
		}
		if err := adm.Settle(ctx, costing(usd)); err != nil {
			t.Fatal(err)
		}
	}
	spend(&policies.Attributes{WorkspaceID: ws, OrganisationID: org, APIKey: "alice", Model: "gpt-4o"}, 0.25)
	spend(&policies.Attributes{WorkspaceID: ws, OrganisationID: org, APIKey: "bob", Model: "o3", VirtualKey: "vk1"}, 1.5)
	members := []Member{{"alice", ws, org}, {"bob", ws, org}, {"carol", ws, org}, {"dave", ws2, org}}

	rep, err := e.Report(ctx, limits, members, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range rep.Groups {
		var parts []string
		for k, v := range g.Group {
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		got = append(got, *g.Limit.Name+" "+strings.Join(parts, ",")+" "+formatFloat(g.Used)+"/"+formatFloat(g.Remaining))
	}
	want := []string{
		"per-key api_key=alice 0.25/0.75", "per-key api_key=bob 1.5/0", "per-key api_key=carol 0/1",
		"bob api_key=bob 1.5/0",
		"gpt api_key=alice 0.25/0.75", "gpt api_key=bob 0/1", "gpt api_key=carol 0/1",
		"per-ws workspace_id=" + ws + " 1.75/0",
		"vk virtual_key=vk1 1.5/0",
		"elsewhere api_key=dave 0/1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("groups:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(rep.PerRequest) != 1 || rep.PerRequest[0] != perModel || rep.Truncated {
		t.Errorf("per request %v, truncated %v: want only per-model, not truncated", rep.PerRequest, rep.Truncated)
	}
	// Used is what was spent, past the limit: bob's $1.50 on $1.
	for _, g := range rep.Groups {
		if g.Limit == onlyBob && (g.Used != 1.5 || g.Remaining != 0) {
			t.Errorf("bob's budget: used %v remaining %v, want 1.5 and 0", g.Used, g.Remaining)
		}
	}

	// The bound: three counters read, the rest left.
	rep, err = e.Report(ctx, limits, members, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 3 || !rep.Truncated {
		t.Errorf("bounded at 3: %d groups, truncated %v", len(rep.Groups), rep.Truncated)
	}
}
