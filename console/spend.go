package console

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// scopeReadBudgets is the scope that lets a key read every usage limit
// and where each group stands (the usage-limits API's ScopeRead): the
// budgets page then shows every key's spend, not only its own.
const scopeReadBudgets = "usage_limits.read"

// spendPage is how many groups the spend table shows at once (the API's
// page; it answers at most 100).
const spendPage = 50

// spendRow is one group of one usage limit, as
// GET /v1/policies/usage-limits/usage answers it.
type spendRow struct {
	PolicyID    string            `json:"policy_id"`
	Name        *string           `json:"name"`
	Type        string            `json:"type"`
	Group       map[string]string `json:"group"`
	CreditLimit float64           `json:"credit_limit"`
	Used        float64           `json:"used"`
	Remaining   float64           `json:"remaining"`
	Reset       string            `json:"periodic_reset"`
	PeriodEnd   string            `json:"period_end"`
	Status      string            `json:"status"`
}

// Title names the row's limit: its name, or what a key's own spending
// limit is (the keys API's usage_limits, whose id says so).
func (s *spendRow) Title() string {
	switch {
	case s.Name != nil && *s.Name != "":
		return *s.Name
	case strings.HasPrefix(s.PolicyID, "api_key:"):
		return "key spending limit"
	case strings.HasPrefix(s.PolicyID, "virtual_key:"):
		return "virtual key spending limit"
	}
	return s.PolicyID
}

// GroupText is the group as "key=value, ..." by key ((none) for an
// absent value, "all" for a limit without group_by).
func (s *spendRow) GroupText() string {
	if len(s.Group) == 0 {
		return "all"
	}
	parts := make([]string, 0, len(s.Group))
	for k, v := range s.Group {
		if v == "" {
			v = "(none)"
		}
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Period says when the row's count starts again.
func (s *spendRow) Period() string {
	if s.PeriodEnd == "" {
		return "never resets"
	}
	return s.Reset + ", resets " + strings.Replace(s.PeriodEnd, "T", " ", 1)
}

// spendData is the spend table: one page of groups, the exhausted and
// nearly exhausted first (the API's order).
type spendData struct {
	Rows       []spendRow `json:"data"`
	Total      int        `json:"total"`
	HasMore    bool       `json:"has_more"`
	Truncated  bool       `json:"truncated"`
	PerRequest []struct {
		PolicyID string  `json:"policy_id"`
		Name     *string `json:"name"`
	} `json:"per_request"`
	// Offset is this page's first row; Prev and Next the neighbours'
	// (Prev -1 on the first page).
	Offset, Prev, Next int
	Err                string
}

// spend reads one page of every group's spend for a key that may read
// budgets (nil for one that may not: its page shows its own spend only),
// from ?offset= on. The API decides what the key sees; a failure is the
// table's, not the page's.
func (h *Handler) spend(r *http.Request, c *ctx) *spendData {
	if !c.can(scopeReadBudgets) {
		return nil
	}
	d := &spendData{}
	if v, err := strconv.Atoi(r.URL.Query().Get("offset")); err == nil && v > 0 {
		d.Offset = v
	}
	q := url.Values{"limit": {strconv.Itoa(spendPage)}, "offset": {strconv.Itoa(d.Offset)}}
	if err := h.getJSON(r, c.s.key, "/policies/usage-limits/usage", q, d); err != nil {
		d.Err = err.Error()
		return d
	}
	d.Prev, d.Next = -1, d.Offset+len(d.Rows)
	if d.Offset > 0 {
		d.Prev = max(d.Offset-spendPage, 0)
	}
	return d
}
