package console

import (
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A breakdown is the analytics API's groups over the overview's range,
// one dimension at a time: one API call per view, whatever the number of
// records. Each row links to the logs page filtered by its value and the
// same range.

// The breakdowns page's template (added here, not in auth.go's list,
// so each page's files stay its own).
func init() {
	pageNames = append(pageNames, "breakdowns")
	funcs["dimensions"] = func() []dimension { return dimensions }
}

// dimension is one breakdown: the groups route, the field of the answer
// holding the group's value, and the logs page's filter for it.
type dimension struct {
	Name, Label, path, field, logsParam string
}

// dimensions are the breakdowns, in the page's order.
var dimensions = []dimension{
	{"key", "Key", "/analytics/groups/api_key", "api_key", "key"},
	{"user", "User", "/analytics/groups/idp-users", "user", "key"},
	{"model", "Model", "/analytics/groups/model", "ai_model", "model"},
	{"provider", "Provider", "/analytics/groups/provider", "provider", "provider"},
	{"workspace", "Workspace", "/analytics/groups/workspace", "workspace_id", "workspace"},
	{"status", "Status", "/analytics/groups/status_code", "status_code", "status"},
}

// breakdownPageSize is how many groups a page shows (the API's page).
const breakdownPageSize = 50

// groupRow is one group of a breakdown.
type groupRow struct {
	Value    string
	Requests int64
	Tokens   int64
	Errors   int64
	CostUSD  string
	LastSeen string
	// Logs is the logs page's query for this group over the range
	// (url.Values-encoded here, so html/template need not encode it
	// again as one query value).
	Logs template.URL
}

type breakdownData struct {
	Range, By  string
	Ranges     []string
	Dims       []dimension
	Label      string
	Rows       []groupRow
	Total      int64
	Page       int
	Prev, Next string
	From, To   string
	// FromText and ToText are From and To for reading.
	FromText, ToText string
}

// rangeSpan reads ?range= as the overview does (24h when absent or
// unknown) and gives the range's name and its [from, to) in UTC, ending
// at the next whole second so the current second's requests count.
func rangeSpan(r *http.Request) (string, time.Time, time.Time) {
	name, span := "24h", 24*time.Hour
	for _, rg := range ranges {
		if rg.Name == r.URL.Query().Get("range") {
			name, span = rg.Name, rg.D
		}
	}
	end := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	return name, end.Add(-span), end
}

// breakdowns shows one dimension's groups over the range.
func (h *Handler) breakdowns(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &breakdownData{Dims: dimensions, By: dimensions[0].Name}
	for _, rg := range ranges {
		d.Ranges = append(d.Ranges, rg.Name)
	}
	var from, to time.Time
	d.Range, from, to = rangeSpan(r)
	dim := dimensions[0]
	for _, dm := range dimensions {
		if dm.Name == r.URL.Query().Get("by") {
			dim = dm
		}
	}
	d.By, d.Label = dim.Name, dim.Label
	d.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	d.Page = min(max(d.Page, 0), 10_000)
	q := url.Values{"time_of_generation_min": {from.Format(time.RFC3339)}, "time_of_generation_max": {to.Format(time.RFC3339)},
		"page_size": {strconv.Itoa(breakdownPageSize)}, "current_page": {strconv.Itoa(d.Page)}}
	var list struct {
		Total int64            `json:"total"`
		Data  []map[string]any `json:"data"`
	}
	p := &page{Title: "Breakdowns", Data: d}
	if err := h.getJSON(r, c.s.key, dim.path, q, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "breakdowns", p)
		return
	}
	// The logs page takes minutes: the range's ends, the start rounded
	// down and the end up, so every record of the range is listed.
	d.From = from.Truncate(time.Minute).Format("2006-01-02T15:04")
	d.To = to.Add(time.Minute - 1).Truncate(time.Minute).Format("2006-01-02T15:04")
	d.FromText, d.ToText = strings.Replace(d.From, "T", " ", 1), strings.Replace(d.To, "T", " ", 1)
	d.Total = list.Total
	for _, g := range list.Data {
		row := groupRow{Value: anyString(g[dim.field]), Requests: anyInt(g["requests"]), Tokens: anyInt(g["total_tokens"]),
			Errors: anyInt(g["error_count"]), CostUSD: anyString(g["cost_usd"]), LastSeen: strings.Replace(anyString(g["last_seen"]), "T", " ", 1)}
		row.Logs = template.URL(url.Values{dim.logsParam: {row.Value}, "from": {d.From}, "to": {d.To}}.Encode())
		d.Rows = append(d.Rows, row)
	}
	link := func(pg int) string {
		return "?" + url.Values{"range": {d.Range}, "by": {d.By}, "page": {strconv.Itoa(pg)}}.Encode()
	}
	if d.Page > 0 {
		d.Prev = link(d.Page - 1)
	}
	if int64((d.Page+1)*breakdownPageSize) < d.Total {
		d.Next = link(d.Page + 1)
	}
	h.renderFor(w, r, c, http.StatusOK, "breakdowns", p)
}

// anyString is a JSON value as text: a string as it is, a number
// without exponent.
func anyString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// anyInt is a JSON number as an integer (0 for anything else).
func anyInt(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// keyUsageSpan is how far back the keys and users pages read each one's
// spend, requests and last use.
const keyUsageSpan = 30 * 24 * time.Hour

// keyUse is one key's (or user's) traffic over keyUsageSpan.
type keyUse struct {
	Requests int64
	CostUSD  string
	LastSeen string
}

// scopeAnalytics is the analytics API's scope: without it the keys and
// users pages show no use rather than the API's 403.
const scopeAnalytics = "analytics.view"

// usageOf reads the traffic of the names over keyUsageSpan in one call
// (the api_key groups filtered to those names), by name. Names the
// filter cannot carry (a comma would split one) are left out.
func (h *Handler) usageOf(r *http.Request, c *ctx, names []string) (map[string]*keyUse, string) {
	if !c.can(scopeAnalytics) {
		return nil, "use not shown: the key lacks " + scopeAnalytics
	}
	var ask []string
	for _, n := range names {
		if n != "" && !strings.Contains(n, ",") && len(n) <= 256 {
			ask = append(ask, n)
		}
	}
	if len(ask) == 0 {
		return nil, ""
	}
	to := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	q := url.Values{"api_key_ids": {strings.Join(ask, ",")}, "page_size": {"100"},
		"time_of_generation_min": {to.Add(-keyUsageSpan).Format(time.RFC3339)}, "time_of_generation_max": {to.Format(time.RFC3339)}}
	var list struct {
		Data []struct {
			APIKey   string `json:"api_key"`
			Requests int64  `json:"requests"`
			CostUSD  string `json:"cost_usd"`
			LastSeen string `json:"last_seen"`
		} `json:"data"`
	}
	if err := h.getJSON(r, c.s.key, "/analytics/groups/api_key", q, &list); err != nil {
		return nil, "use not shown: " + err.Error()
	}
	out := make(map[string]*keyUse, len(list.Data))
	for _, g := range list.Data {
		out[g.APIKey] = &keyUse{Requests: g.Requests, CostUSD: g.CostUSD, LastSeen: strings.Replace(g.LastSeen, "T", " ", 1)}
	}
	return out, ""
}

// keysUse fills each key's Use from one grouped ledger query for the
// page (not one per key) and says why it could not, if so.
func (h *Handler) keysUse(r *http.Request, c *ctx, ks []keyRow) string {
	names := make([]string, len(ks))
	for i := range ks {
		names[i] = ks[i].Name
	}
	use, why := h.usageOf(r, c, names)
	for i := range ks {
		ks[i].Use = use[ks[i].Name]
	}
	return why
}
