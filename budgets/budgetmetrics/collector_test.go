package budgetmetrics

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// source is a budgets.Source of fixed limits.
type source []*budgets.UsageLimit

func (s source) Active(context.Context) ([]*budgets.UsageLimit, error) { return s, nil }

// reader reads a real enforcer over an in-memory limiter, counting the
// counters read and failing them on demand.
type reader struct {
	source
	e *budgets.Enforcer

	mu    sync.Mutex
	reads int
	fail  error
}

func newReader(limits ...*budgets.UsageLimit) *reader {
	s := source(limits)
	return &reader{source: s, e: budgets.NewEnforcer(policies.NewMemoryLimiter(), s, nil, nil)}
}

func (r *reader) Limits(ctx context.Context) ([]*budgets.UsageLimit, error) { return r.e.Limits(ctx) }

func (r *reader) StatusOf(ctx context.Context, u *budgets.UsageLimit, a *policies.Attributes) (budgets.Status, error) {
	r.mu.Lock()
	r.reads++
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return budgets.Status{}, fail
	}
	return r.e.StatusOf(ctx, u, a)
}

// spend reserves usd on every limit matching a, as a request in flight
// does: the status counts it as used.
func (r *reader) spend(t *testing.T, a *policies.Attributes, usd float64) {
	t.Helper()
	_, refused, err := r.e.Admit(context.Background(), a, budgets.Reserve{NanoUSD: budgets.NanoUSD(usd)})
	if err != nil || refused != nil {
		t.Fatalf("admit: %v %v", refused, err)
	}
}

// gauges collects c and returns each series' value by name{policy_id,group}.
func gauges(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1024)
	go func() { c.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		l := map[string]string{}
		for _, lp := range pb.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		name := m.Desc().String()
		name = name[strings.Index(name, `fqName: "`)+9:]
		name = name[:strings.IndexByte(name, '"')]
		k := name + "{" + l["policy_id"] + "," + l["type"] + "," + l["group"] + "}"
		if _, dup := out[k]; dup {
			t.Fatalf("series %s collected twice", k)
		}
		out[k] = pb.GetGauge().GetValue()
	}
	return out
}

// TestCollectorGauges: limit, used and remaining of each noted group,
// in the limit's unit, for a cost and a tokens limit.
func TestCollectorGauges(t *testing.T) {
	cost := limit(t, budgets.UsageLimit{ID: "team-usd", CreditLimit: 5, WorkspaceID: wsA, GroupBy: byKey(policies.KeyAPIKey)})
	tokens := limit(t, budgets.UsageLimit{ID: "all-tokens", Type: policies.TypeTokens, CreditLimit: 1000, GroupBy: byKey(policies.KeyWorkspaceID)})
	r := newReader(cost, tokens)
	g := NewGroups(0)
	c := NewCollector(g, r)
	if n := len(gauges(t, c)); n != 0 {
		t.Fatalf("%d series before any request", n)
	}
	red, blue := keyAttrs(wsA, "red"), keyAttrs(wsA, "blue")
	r.spend(t, red, 2)
	r.spend(t, blue, 7) // more than the limit: reserved what remained
	for _, a := range []*policies.Attributes{red, blue} {
		g.Note(r.source, a)
	}
	c.at = time.Time{} // the read above, of limits without groups yet, is cached
	got := gauges(t, c)
	want := map[string]float64{
		"llm_gateway_budget_limit{team-usd,cost,api_key=red}":                      5,
		"llm_gateway_budget_used{team-usd,cost,api_key=red}":                       2,
		"llm_gateway_budget_remaining{team-usd,cost,api_key=red}":                  3,
		"llm_gateway_budget_limit{team-usd,cost,api_key=blue}":                     5,
		"llm_gateway_budget_used{team-usd,cost,api_key=blue}":                      5,
		"llm_gateway_budget_remaining{team-usd,cost,api_key=blue}":                 0,
		"llm_gateway_budget_limit{all-tokens,tokens,workspace_id=" + wsA + "}":     1000,
		"llm_gateway_budget_used{all-tokens,tokens,workspace_id=" + wsA + "}":      0,
		"llm_gateway_budget_remaining{all-tokens,tokens,workspace_id=" + wsA + "}": 1000,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// TestCollectorTopGroupsAndOther: a limit's TopGroups most used groups
// have series of their own; the rest are summed in group "other".
func TestCollectorTopGroupsAndOther(t *testing.T) {
	u := limit(t, budgets.UsageLimit{ID: "per-key", CreditLimit: 100, WorkspaceID: wsA, GroupBy: byKey(policies.KeyAPIKey)})
	r := newReader(u)
	g := NewGroups(0)
	n := TopGroups + 3
	for i := 1; i <= n; i++ {
		a := keyAttrs(wsA, "k"+strconv.Itoa(i))
		r.spend(t, a, float64(i)) // k<n> is the most used
		g.Note(r.source, a)
	}
	got := gauges(t, NewCollector(g, r))
	if len(got) != 3*(TopGroups+1) {
		t.Fatalf("%d series, want %d", len(got), 3*(TopGroups+1))
	}
	for i := 4; i <= n; i++ {
		if got["llm_gateway_budget_used{per-key,cost,api_key=k"+strconv.Itoa(i)+"}"] != float64(i) {
			t.Errorf("k%d lacks its own series", i)
		}
	}
	if got["llm_gateway_budget_used{per-key,cost,other}"] != 1+2+3 || got["llm_gateway_budget_limit{per-key,cost,other}"] != 300 ||
		got["llm_gateway_budget_remaining{per-key,cost,other}"] != 300-6 {
		t.Errorf("other: used %v limit %v remaining %v; want the three least used summed",
			got["llm_gateway_budget_used{per-key,cost,other}"], got["llm_gateway_budget_limit{per-key,cost,other}"],
			got["llm_gateway_budget_remaining{per-key,cost,other}"])
	}
}

// TestCollectorReadsOncePerRefresh: scrapes within RefreshEvery share
// one read; a request description whose groups were read already is
// not read again; after RefreshEvery the limits are read again.
func TestCollectorReadsOncePerRefresh(t *testing.T) {
	u := limit(t, budgets.UsageLimit{ID: "per-key", WorkspaceID: wsA, GroupBy: byKey(policies.KeyAPIKey)})
	r := newReader(u)
	g := NewGroups(0)
	g.Note(r.source, keyAttrs(wsA, "a"))
	g.Note(r.source, keyAttrs(wsA, "b"))
	now := time.Unix(1e9, 0)
	c := NewCollector(g, r)
	c.now = func() time.Time { return now }
	for i := 0; i < 5; i++ {
		gauges(t, c)
	}
	if r.reads != 2 {
		t.Fatalf("%d status reads for 5 scrapes of 2 groups, want 2", r.reads)
	}
	now = now.Add(RefreshEvery)
	gauges(t, c)
	if r.reads != 4 {
		t.Errorf("%d status reads after RefreshEvery, want 4", r.reads)
	}
}

// TestCollectorReadsEachGroupOnce: a group both configured and seen in a
// request (an API key's own limit) is read once per refresh.
func TestCollectorReadsEachGroupOnce(t *testing.T) {
	key := limit(t, budgets.UsageLimit{ID: "api_key:rec-1", WorkspaceID: wsA, OrganisationID: org,
		Conditions: []policies.Condition{{Key: policies.KeyAPIKey, Value: "team-a"}}, GroupBy: byKey(policies.KeyAPIKey)})
	r := newReader(key)
	g := NewGroups(0)
	g.Note(r.source, &policies.Attributes{WorkspaceID: wsA, OrganisationID: org, APIKey: "team-a", Model: "gpt-4o"})
	if got := gauges(t, NewCollector(g, r)); len(got) != 3 || r.reads != 1 {
		t.Errorf("%d series from %d reads, want 3 from 1", len(got), r.reads)
	}
}

// TestCollectorErrorHasNoSeries: when the limits cannot be read the
// scrape has no budget series (not stale money) and OnError is told.
func TestCollectorErrorHasNoSeries(t *testing.T) {
	u := limit(t, budgets.UsageLimit{ID: "per-key", WorkspaceID: wsA, GroupBy: byKey(policies.KeyAPIKey)})
	r := newReader(u)
	g := NewGroups(0)
	g.Note(r.source, keyAttrs(wsA, "a"))
	c := NewCollector(g, r)
	if len(gauges(t, c)) != 3 {
		t.Fatal("no series while the store answers")
	}
	down := errors.New("redis: connection refused")
	r.fail = down
	var told error
	c.OnError = func(err error) { told = err }
	c.at = time.Time{}
	if got := gauges(t, c); len(got) != 0 || !errors.Is(told, down) {
		t.Errorf("store down: series %v, told %v", got, told)
	}
}

// TestConfiguredGroups: a limit whose conditions fix its one group (an
// API key's usage_limits) has series before any request; a limit whose
// groups depend on requests has none until one is seen.
func TestConfiguredGroups(t *testing.T) {
	key := limit(t, budgets.UsageLimit{ID: "api_key:rec-1", WorkspaceID: wsA, OrganisationID: org,
		Conditions: []policies.Condition{{Key: policies.KeyAPIKey, Value: "team-a"}}, GroupBy: byKey(policies.KeyAPIKey)})
	wild := limit(t, budgets.UsageLimit{ID: "wild", WorkspaceID: wsA,
		Conditions: []policies.Condition{{Key: policies.KeyAPIKey, Value: "*"}}, GroupBy: byKey(policies.KeyAPIKey)})
	noWS := limit(t, budgets.UsageLimit{ID: "no-ws",
		Conditions: []policies.Condition{{Key: policies.KeyAPIKey, Value: "team-b"}}, GroupBy: byKey(policies.KeyAPIKey)})
	model := limit(t, budgets.UsageLimit{ID: "model", CreditLimit: 3,
		Conditions: []policies.Condition{{Key: policies.KeyModel, Value: "gpt-4o"}, {Key: "metadata.team", Value: "red"}},
		GroupBy:    byKey("metadata.team")})
	got := gauges(t, NewCollector(NewGroups(0), newReader(key, wild, noWS, model)))
	want := map[string]float64{
		"llm_gateway_budget_limit{api_key:rec-1,cost,api_key=team-a}": 10,
		"llm_gateway_budget_limit{model,cost,metadata.team=red}":      3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != 3*len(want) {
		t.Errorf("series %v, want only those of the configured groups", got)
	}
}

// TestCollectorShowsANewLimitAtOnce: without limits nothing is read,
// so the first limit created shows at the next scrape, not RefreshEvery
// later.
func TestCollectorShowsANewLimitAtOnce(t *testing.T) {
	r := newReader()
	now := time.Unix(1e9, 0)
	c := NewCollector(NewGroups(0), r)
	c.now = func() time.Time { return now }
	if len(gauges(t, c)) != 0 {
		t.Fatal("series without limits")
	}
	key := limit(t, budgets.UsageLimit{ID: "api_key:rec-1", WorkspaceID: wsA,
		Conditions: []policies.Condition{{Key: policies.KeyAPIKey, Value: "team-a"}}, GroupBy: byKey(policies.KeyAPIKey)})
	r.source = source{key}
	r.e = budgets.NewEnforcer(policies.NewMemoryLimiter(), r.source, nil, nil)
	if len(gauges(t, c)) != 3 {
		t.Error("the new limit does not show at the next scrape")
	}
}

// TestZeroCollectorDescribesOnly: the declared instance describes the
// three gauges and collects nothing.
func TestZeroCollectorDescribesOnly(t *testing.T) {
	ch := make(chan *prometheus.Desc, 8)
	new(Collector).Describe(ch)
	close(ch)
	if len(ch) != 3 {
		t.Errorf("%d descriptions, want 3", len(ch))
	}
	if got := gauges(t, new(Collector)); len(got) != 0 {
		t.Errorf("the zero collector collected %v", got)
	}
}
