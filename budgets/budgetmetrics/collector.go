package budgetmetrics

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// TopGroups is how many groups of one limit get series of their own, the
// most used first; the others of the limit are summed in group "other".
const TopGroups = 20

// OtherGroup labels the sum of a limit's groups past TopGroups.
const OtherGroup = "other"

// RefreshEvery is how old the values a scrape gets may be: the collector
// reads the limits' status at most once per RefreshEvery, however many
// scrapes (or instances of Prometheus) ask.
const RefreshEvery = 15 * time.Second

// readTimeout bounds one refresh's reads.
const readTimeout = 5 * time.Second

var labels = []string{"policy_id", "type", "group"}

var (
	limitDesc = prometheus.NewDesc("llm_gateway_budget_limit",
		"A usage limit's credit_limit for a group, in the limit's unit (US dollars for type cost, tokens for type tokens).", labels, nil)
	usedDesc = prometheus.NewDesc("llm_gateway_budget_used",
		"What a group has used of a usage limit in its current period, reservations in flight included (it may pass the limit by the last request's overshoot).", labels, nil)
	remainingDesc = prometheus.NewDesc("llm_gateway_budget_remaining",
		"What a group has left of a usage limit in its current period (0 when spent).", labels, nil)
)

// Reader is what the collector reads: the active limits and where one
// group of a limit stands (a *budgets.Enforcer).
type Reader interface {
	// Limits is budgets.Enforcer.Limits.
	Limits(ctx context.Context) ([]*budgets.UsageLimit, error)
	// StatusOf is budgets.Enforcer.StatusOf.
	StatusOf(ctx context.Context, u *budgets.UsageLimit, a *policies.Attributes) (budgets.Status, error)
}

// Collector is the prometheus.Collector of the budget gauges. Its zero
// value describes them and collects none.
type Collector struct {
	groups *Groups
	read   Reader
	// OnError is told why a refresh failed (nil: nobody); the scrape
	// then has no budget series, rather than stale money.
	OnError func(error)
	now     func() time.Time

	mu   sync.Mutex
	at   time.Time
	snap []sample
}

// sample is one series' values.
type sample struct {
	policy, typ, group     string
	limit, used, remaining float64
}

// NewCollector returns a collector of the groups in groups, and of the
// limits whose groups the limits themselves fix (configuredGroups), read
// through r.
func NewCollector(groups *Groups, r Reader) *Collector {
	return &Collector{groups: groups, read: r, now: time.Now}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- limitDesc
	ch <- usedDesc
	ch <- remainingDesc
}

// Collect implements prometheus.Collector: the values of the last
// refresh, refreshed first when older than RefreshEvery.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.read == nil {
		return
	}
	for _, s := range c.samples() {
		lv := []string{s.policy, s.typ, s.group}
		ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, s.limit, lv...)
		ch <- prometheus.MustNewConstMetric(usedDesc, prometheus.GaugeValue, s.used, lv...)
		ch <- prometheus.MustNewConstMetric(remainingDesc, prometheus.GaugeValue, s.remaining, lv...)
	}
}

// samples returns the cached samples, refreshing them when due. One
// scrape refreshes while concurrent ones wait for its result.
func (c *Collector) samples() []sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.at.IsZero() && now.Sub(c.at) < RefreshEvery {
		return c.snap
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	snap, read, err := c.refresh(ctx)
	if err != nil && c.OnError != nil {
		c.OnError(err)
	}
	c.at, c.snap = time.Time{}, snap
	if read || err != nil {
		// Without a limit nothing was read, and the first limit created
		// shows at the next scrape.
		c.at = now
	}
	return snap
}

// refresh reads the status of every configured and tracked group once
// (one counter each); read is false when there was no limit to read.
func (c *Collector) refresh(ctx context.Context) (_ []sample, read bool, _ error) {
	limits, err := c.read.Limits(ctx)
	if err != nil || len(limits) == 0 {
		return nil, false, err
	}
	active := make(map[string]*budgets.UsageLimit, len(limits))
	for _, u := range limits {
		active[u.ID] = u
	}
	gs := append(configuredGroups(limits), c.groups.list(active)...)
	type id struct{ policy, group string }
	seen := make(map[id]bool, len(gs))
	out := make([]sample, 0, len(gs))
	for _, g := range gs {
		k := id{g.limit, g.label}
		if seen[k] {
			continue // configured, and seen in a request too
		}
		seen[k] = true
		s, err := c.read.StatusOf(ctx, active[g.limit], g.attrs)
		if err != nil {
			return nil, true, err
		}
		out = append(out, sample{policy: s.PolicyID, typ: s.Type, group: g.label,
			limit: s.CreditLimit, used: s.Used, remaining: s.Remaining})
	}
	return top(out, TopGroups), true, nil
}

// top keeps the n most used groups of each limit and sums the others of
// the limit in one sample of group OtherGroup (limit, used and remaining
// each summed). Samples come out by policy, most used first.
func top(in []sample, n int) []sample {
	sort.SliceStable(in, func(i, j int) bool {
		if in[i].policy != in[j].policy {
			return in[i].policy < in[j].policy
		}
		if in[i].used != in[j].used {
			return in[i].used > in[j].used
		}
		return in[i].group < in[j].group
	})
	out := in[:0]
	for i := 0; i < len(in); {
		j := i
		for j < len(in) && in[j].policy == in[i].policy {
			j++
		}
		kept := min(j-i, n)
		out = append(out, in[i:i+kept]...)
		if rest := in[i+kept : j]; len(rest) > 0 {
			o := sample{policy: in[i].policy, typ: in[i].typ, group: OtherGroup}
			for _, s := range rest {
				o.limit += s.limit
				o.used += s.used
				o.remaining += s.remaining
			}
			out = append(out, o)
		}
		i = j
	}
	return out
}

// configuredGroups returns the groups limits fix themselves, needing no
// request to be known: those of a limit whose every condition names one
// value and whose group_by keys are all among its conditions, such as
// the limit an API key's usage_limits make (api_key = its name, grouped
// by api_key). An api_key group needs the limit's workspace, since key
// names are unique only within one.
func configuredGroups(limits []*budgets.UsageLimit) []*group {
	var out []*group
	for _, u := range limits {
		if a := configured(u); a != nil {
			out = append(out, &group{key: u.ID, limit: u.ID, label: Label(u, a), attrs: a})
		}
	}
	return out
}

// configured is the request description of u's one group, or nil when
// u's conditions do not fix it.
func configured(u *budgets.UsageLimit) *policies.Attributes {
	if u.Policy() == nil || len(u.Conditions) == 0 {
		return nil
	}
	a := &policies.Attributes{WorkspaceID: u.WorkspaceID, OrganisationID: u.OrganisationID}
	for _, c := range u.Conditions {
		if c.Value == "*" || c.Value == "" || !set(a, c.Key, c.Value) {
			return nil
		}
	}
	for _, gb := range u.GroupBy {
		if _, ok := a.Get(gb.Key); !ok || gb.Key == policies.KeyAPIKey && a.WorkspaceID == "" {
			return nil
		}
	}
	if !u.Policy().Matches(a) {
		return nil
	}
	return a
}

// set sets attribute key of a to v; false for a key Attributes has no
// field for, or one already set to another value.
func set(a *policies.Attributes, key, v string) bool {
	var f *string
	switch key {
	case policies.KeyWorkspaceID:
		f = &a.WorkspaceID
	case policies.KeyOrganisationID:
		f = &a.OrganisationID
	case policies.KeyAPIKey:
		f = &a.APIKey
	case policies.KeyVirtualKey:
		f = &a.VirtualKey
	case policies.KeyProvider:
		f = &a.Provider
	case policies.KeyModel:
		f = &a.Model
	case policies.KeyConfigID:
		f = &a.ConfigID
	default:
		m, ok := strings.CutPrefix(key, policies.MetadataPrefix)
		if !ok || m == "" {
			return false
		}
		if a.Metadata == nil {
			a.Metadata = map[string]string{}
		}
		if old, ok := a.Metadata[m]; ok && old != v {
			return false
		}
		a.Metadata[m] = v
		return true
	}
	if *f != "" && *f != v {
		return false
	}
	*f = v
	return true
}

// The gauges' descriptions, for the list of every metric the gateway
// exports; the collector that reads them is built per config load.
var _ = metricset.Declare(new(Collector))
