package budgetapi

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// usagePath is the spend report's route: a literal, so the mux prefers
// it to {id}.
const usagePath = collection + "/usage"

// Bounds of the spend report. A page is at most maxUsagePage groups;
// one call reads at most budgets.DefaultReportGroups counters, over the
// first maxUsageMembers keys within the caller's reach (the Caddyfile's,
// then the API's in creation order): the groups past either bound are
// not read, and the answer says truncated.
const (
	defaultUsagePage = 50
	maxUsagePage     = 100
	maxUsageMembers  = 10_000
)

// Values of a group's status.
const (
	statusActive    = "active"
	statusExhausted = "exhausted"
)

// ObjectUsage is the "object" of one group in the spend report.
const ObjectUsage = "usage-limit-usage"

// groupUsage is where one group of a usage limit stands, in the limit's
// unit (US dollars or tokens).
type groupUsage struct {
	Object      string            `json:"object"`
	PolicyID    string            `json:"policy_id"`
	Name        *string           `json:"name"`
	Type        string            `json:"type"`
	WorkspaceID string            `json:"workspace_id"`
	Group       map[string]string `json:"group"`
	CreditLimit float64           `json:"credit_limit"`
	// Used is what the period spent, reservations in flight included,
	// beyond the limit when the last requests cost more than reserved.
	Used      float64  `json:"used"`
	Remaining float64  `json:"remaining"`
	Alert     *float64 `json:"alert_threshold"`
	Reset     string   `json:"periodic_reset"`
	// PeriodStart and PeriodEnd bound the current period (empty for a
	// limit that never resets).
	PeriodStart string `json:"period_start,omitempty"`
	PeriodEnd   string `json:"period_end,omitempty"`
	// Status is exhausted when nothing remains (the next request of the
	// group answers 412), else active.
	Status string `json:"status"`
}

// perRequest names a limit whose groups are not listed (see
// budgets.Report.PerRequest).
type perRequest struct {
	PolicyID string             `json:"policy_id"`
	Name     *string            `json:"name"`
	GroupBy  []policies.GroupBy `json:"group_by"`
}

// usageAnswer is the spend report: Total groups read, sorted, one page
// of them in Data.
type usageAnswer struct {
	Object     string       `json:"object"`
	Total      int          `json:"total"`
	Data       []groupUsage `json:"data"`
	HasMore    bool         `json:"has_more"`
	Truncated  bool         `json:"truncated"`
	PerRequest []perRequest `json:"per_request"`
}

// usage answers GET /v1/policies/usage-limits/usage?limit=&offset=: where
// every group of every usage limit the caller may see stands now (the
// limits of its workspace, or its organisation for an organisation key,
// and the spending limits set on the keys it reaches), sorted so the
// exhausted and nearly exhausted come first (the least left of the limit
// first), limit groups a page from offset. The groups are found from the
// keys the caller reaches (budgets.Enforcer.Report): another
// organisation's limit or key is never read.
func usage(c *call) (any, error) {
	q := c.r.URL.Query()
	size, err := intParam(q.Get("limit"), "limit", defaultUsagePage, 1, maxUsagePage)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(q.Get("offset"), "offset", 0, 0, budgets.DefaultReportGroups)
	if err != nil {
		return nil, err
	}
	e := c.app.BudgetEnforcer()
	all, err := e.Limits(c.r.Context())
	if err != nil {
		return nil, err
	}
	var limits []*budgets.UsageLimit
	for _, u := range all {
		if c.visible(u) {
			limits = append(limits, u)
		}
	}
	rep, err := e.Report(c.r.Context(), limits, c.members(), budgets.DefaultReportGroups)
	if err != nil {
		return nil, err
	}
	rows := make([]groupUsage, 0, len(rep.Groups))
	for _, g := range rep.Groups {
		s := g.Status
		st := statusActive
		if s.Remaining <= 0 {
			st = statusExhausted
		}
		rows = append(rows, groupUsage{Object: ObjectUsage, PolicyID: s.PolicyID, Name: s.Name, Type: s.Type,
			WorkspaceID: g.Limit.WorkspaceID, Group: g.Group, CreditLimit: s.CreditLimit, Used: s.Used, Remaining: s.Remaining,
			Alert: s.Alert, Reset: s.Reset, PeriodStart: s.PeriodStart, PeriodEnd: s.PeriodEnd, Status: st})
	}
	slices.SortStableFunc(rows, func(a, b groupUsage) int {
		if c := cmp.Compare(a.Remaining/a.CreditLimit, b.Remaining/b.CreditLimit); c != 0 {
			return c
		}
		return cmp.Compare(b.Used/b.CreditLimit, a.Used/a.CreditLimit)
	})
	out := usageAnswer{Object: "list", Total: len(rows), Data: rows[min(offset, len(rows)):min(offset+size, len(rows))],
		HasMore: offset+size < len(rows), Truncated: rep.Truncated, PerRequest: []perRequest{}}
	for _, u := range rep.PerRequest {
		out.PerRequest = append(out.PerRequest, perRequest{PolicyID: u.ID, Name: u.Name, GroupBy: u.GroupBy})
	}
	return out, nil
}

// members are the keys the caller reaches, as the keys API lists them
// (keys.Actor.Sees, the authorisation rule's tenancy and reach), but the
// revoked ones, which spend no more: the Caddyfile's, then the API's.
func (c *call) members() []budgets.Member {
	actor := keys.ActorOf(c.id)
	var out []budgets.Member
	for _, k := range c.app.ConfigKeys() {
		if actor.Sees(k.OrganisationID, k.WorkspaceID, k.Type == keys.TypeOrganisation) && len(out) < maxUsageMembers {
			out = append(out, budgets.Member{APIKey: k.Name, WorkspaceID: k.WorkspaceID, OrganisationID: k.OrganisationID})
		}
	}
	if ks := c.app.KeyStore(); ks != nil && len(out) < maxUsageMembers {
		page, _, _ := ks.ListAPIKeys(func(r *keys.APIKey) bool {
			return r.Status != keys.StatusRevoked && actor.Sees(r.OrganisationID, r.WorkspaceID, r.Type == keys.TypeOrganisation)
		}, "", 0, maxUsageMembers-len(out))
		for _, r := range page {
			out = append(out, budgets.Member{APIKey: r.Name, WorkspaceID: r.WorkspaceID, OrganisationID: r.OrganisationID})
		}
	}
	return out
}

// intParam reads an integer query parameter within [lo, hi], def when
// absent.
func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return 0, apierror.BadRequest(name, "%s must be a whole number from %d to %d", name, lo, hi)
	}
	return n, nil
}
