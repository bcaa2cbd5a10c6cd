// Package budgetmetrics exports where usage limits (budgets) stand as
// Prometheus gauges: llm_gateway_budget_limit, _used and _remaining per
// limit and group. The values are read when Prometheus scrapes, through
// the budgets package's exported status API (Enforcer.StatusOf), at most
// once per RefreshEvery however often it scrapes; the request path only
// notes which groups exist (Groups.Note).
//
// A limit's groups are the distinct values of its group_by attributes,
// which clients choose (a metadata value) or which grow with the tenants
// (key names, workspaces), so the set is bounded twice: the groups
// tracked (MaxGroups, the most recently seen), and the groups of one
// limit that get series of their own (the TopGroups most used; the rest
// are summed in one group "other").
package budgetmetrics

import (
	"container/list"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// MaxGroups bounds the groups a Groups tracks, every limit's together;
// past it the group seen least recently is forgotten.
const MaxGroups = 1024

// MaxLabelBytes bounds a group label value; a longer one is cut (at a
// character boundary).
const MaxLabelBytes = 128

// Groups is the bounded set of (usage limit, group) pairs requests were
// seen in, most recently seen first. It outlives config reloads (the llm
// app keeps it in a caddy.UsagePool), so the gauges do not vanish on a
// reload. It is safe for concurrent use.
type Groups struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*list.Element
	order list.List // of *group, front: most recently seen
}

// group is one (limit, group) pair.
type group struct {
	// key is policies.Policy.GroupKey: the limit's id and the group's
	// values, unique across limits and groups.
	key   string
	limit string
	label string
	// attrs describes a request of the group, for Enforcer.StatusOf.
	// The groups noted from one request share one copy.
	attrs *policies.Attributes
}

// NewGroups returns an empty set of at most max groups (MaxGroups when
// max <= 0).
func NewGroups(max int) *Groups {
	if max <= 0 {
		max = MaxGroups
	}
	return &Groups{max: max, byKey: make(map[string]*list.Element)}
}

// Note records the group of the request described by a (its attributes
// all filled in, as for Enforcer.Admit) under each of limits that matches
// it. Admission calls it for every request a usage limit may apply to,
// admitted or refused, so a group whose budget is spent stays tracked.
// A group already tracked costs a map lookup and its key.
func (g *Groups) Note(limits []*budgets.UsageLimit, a *policies.Attributes) {
	if g == nil || a == nil {
		return
	}
	var shared *policies.Attributes
	for _, u := range limits {
		p := u.Policy()
		if p == nil || !p.Matches(a) {
			continue
		}
		key := p.GroupKey(a)
		g.mu.Lock()
		if el, ok := g.byKey[key]; ok {
			g.order.MoveToFront(el)
			g.mu.Unlock()
			continue
		}
		g.mu.Unlock()
		if shared == nil {
			shared = snapshot(a)
		}
		g.add(&group{key: key, limit: u.ID, label: Label(u, a), attrs: shared})
	}
}

// add inserts gr, unless another caller did meanwhile, and forgets the
// least recently seen group past the bound.
func (g *Groups) add(gr *group) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if el, ok := g.byKey[gr.key]; ok {
		g.order.MoveToFront(el)
		return
	}
	g.byKey[gr.key] = g.order.PushFront(gr)
	for g.order.Len() > g.max {
		last := g.order.Back()
		g.order.Remove(last)
		delete(g.byKey, last.Value.(*group).key)
	}
}

// Len returns the number of groups tracked.
func (g *Groups) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.order.Len()
}

// list returns the tracked groups, most recently seen first, forgetting
// those of limits no longer active.
func (g *Groups) list(active map[string]*budgets.UsageLimit) []*group {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*group, 0, g.order.Len())
	for el := g.order.Front(); el != nil; {
		next := el.Next()
		gr := el.Value.(*group)
		if active[gr.limit] == nil {
			g.order.Remove(el)
			delete(g.byKey, gr.key)
		} else {
			out = append(out, gr)
		}
		el = next
	}
	return out
}

// snapshot copies a, so the set holds nothing of the request.
func snapshot(a *policies.Attributes) *policies.Attributes {
	c := *a
	c.Pending = 0
	if a.Metadata != nil {
		c.Metadata = make(map[string]string, len(a.Metadata))
		for k, v := range a.Metadata {
			c.Metadata[k] = v
		}
	}
	return &c
}

// Label is the group label of the request described by a under u: its
// group_by attributes as key=value pairs joined by commas, in group_by's
// order ("api_key=team-a", "workspace_id=…,metadata.user=u1"), or "all"
// for a limit without group_by. Key names are unique within a workspace
// only, so a limit that spans workspaces (none set) labels an api_key
// group with its workspace too, unless it groups by workspace_id itself.
// Values are names and ids, never keys; each label is at most
// MaxLabelBytes of valid UTF-8.
func Label(u *budgets.UsageLimit, a *policies.Attributes) string {
	if len(u.GroupBy) == 0 {
		return "all"
	}
	byWorkspace := false
	for _, gb := range u.GroupBy {
		byWorkspace = byWorkspace || gb.Key == policies.KeyWorkspaceID
	}
	var b strings.Builder
	for _, gb := range u.GroupBy {
		v, _ := a.Get(gb.Key)
		if gb.Key == policies.KeyAPIKey && u.WorkspaceID == "" && !byWorkspace {
			pair(&b, policies.KeyWorkspaceID, a.WorkspaceID)
		}
		pair(&b, gb.Key, v)
	}
	return cut(b.String())
}

func pair(b *strings.Builder, k, v string) {
	if b.Len() > 0 {
		b.WriteByte(',')
	}
	b.WriteString(k)
	b.WriteByte('=')
	b.WriteString(v)
}

// cut makes v valid UTF-8 of at most MaxLabelBytes.
func cut(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	if len(v) <= MaxLabelBytes {
		return v
	}
	n := MaxLabelBytes
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n]
}
