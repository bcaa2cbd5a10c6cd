package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"join": strings.Join,
	"add":  func(a, b int) int { return a + b },
	// num writes an amount without exponent (0.000015, not 1.5e-05).
	"num": func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
	// statuses are the keys page's status choices ("" is any).
	"statuses": func() []string { return []string{"", "active", "disabled", "revoked", "exhausted"} },
}

// ranges are the overview's choices, by the name the form sends.
var ranges = []struct {
	Name string
	D    time.Duration
}{{"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}, {"30d", 30 * 24 * time.Hour}}

// bucket is one row of the overview: a bucket of the analytics graphs.
type bucket struct {
	Time     string
	Requests int64
	Errors   int64
	Tokens   int64
	CostUSD  string
}

type overviewData struct {
	Range    string
	Ranges   []string
	Requests int64
	Errors   int64
	Tokens   int64
	CostUSD  string
	// LatencyAvg and LatencyP99 are in milliseconds; CacheHitRate in
	// percent.
	LatencyAvg, LatencyP99, CacheHitRate float64
	// Chart is the requests per bucket, laid out for the SVG.
	Chart *chart
	// Rows are the buckets with traffic, for the table.
	Rows []bucket
}

// graph is an analytics graph as the API answers it.
type graph struct {
	Summary    map[string]json.RawMessage   `json:"summary"`
	DataPoints []map[string]json.RawMessage `json:"data_points"`
}

func num(m map[string]json.RawMessage, k string) int64 { return int64(numf(m, k)) }

func numf(m map[string]json.RawMessage, k string) float64 {
	var f float64
	_ = json.Unmarshal(m[k], &f)
	return f
}

func str(m map[string]json.RawMessage, k string) string {
	var s string
	_ = json.Unmarshal(m[k], &s)
	return s
}

// overview shows requests, errors, tokens and cost over a range, from
// the analytics graphs (the same numbers any client reads).
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &overviewData{Range: "24h"}
	span := 24 * time.Hour
	for _, rg := range ranges {
		d.Ranges = append(d.Ranges, rg.Name)
		if rg.Name == r.URL.Query().Get("range") {
			d.Range, span = rg.Name, rg.D
		}
	}
	// The range ends at the next whole second, so the requests of the
	// current second count.
	end := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	unit := rangeBuckets[d.Range]
	q := url.Values{"time_of_generation_min": {end.Add(-span).Format(time.RFC3339)}, "time_of_generation_max": {end.Format(time.RFC3339)},
		"bucket": {unit}}
	var req, errs, tok, cost, lat, hit graph
	graphs := []struct {
		path string
		out  *graph
	}{{"/analytics/graphs/requests", &req}, {"/analytics/graphs/errors", &errs}, {"/analytics/graphs/tokens", &tok},
		{"/analytics/graphs/cost", &cost}, {"/analytics/graphs/latency", &lat}, {"/analytics/graphs/cache/hit-rate", &hit}}
	// The graphs are independent queries: ask for them at once, so the
	// page takes as long as the slowest, not their sum.
	var g errgroup.Group
	for _, gr := range graphs {
		g.Go(func() error { return h.getJSON(r, c.s.key, gr.path, q, gr.out) })
	}
	if err := g.Wait(); err != nil {
		h.renderFor(w, r, c, statusOf(err), "overview", &page{Title: "Overview", Err: err.Error(), Data: d})
		return
	}
	d.LatencyAvg, d.LatencyP99 = numf(lat.Summary, "avg"), numf(lat.Summary, "p99")
	d.CacheHitRate = numf(hit.Summary, "rate")
	d.Requests, d.Errors, d.Tokens = num(req.Summary, "total"), num(errs.Summary, "total"), num(tok.Summary, "total")
	d.CostUSD = str(cost.Summary, "total_usd")
	var all []bucket
	for i, p := range req.DataPoints {
		b := bucket{Time: str(p, "timestamp"), Requests: num(p, "total")}
		if i < len(errs.DataPoints) {
			b.Errors = num(errs.DataPoints[i], "total")
		}
		if i < len(tok.DataPoints) {
			b.Tokens = num(tok.DataPoints[i], "total")
		}
		if i < len(cost.DataPoints) {
			b.CostUSD = str(cost.DataPoints[i], "total_usd")
		}
		all = append(all, b)
		if b.Requests > 0 {
			d.Rows = append(d.Rows, b)
		}
	}
	d.Chart = buildChart(all, unit)
	h.renderFor(w, r, c, http.StatusOK, "overview", &page{Title: "Overview", Data: d})
}

// keyRow is one key of the keys page.
type keyRow struct {
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	Status    string    `json:"status"`
	Scopes    []string  `json:"scopes"`
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
	// WorkspaceID and ExpiresAt are the key's (nil: it does not expire).
	WorkspaceID string     `json:"workspace_id"`
	ExpiresAt   *time.Time `json:"expires_at"`
	// Use is the key's traffic over keyUsageSpan (nil: none, or not read).
	Use *keyUse `json:"-"`
}

type keysData struct {
	Keys  []keyRow
	Total int
	Next  string
	After string
	// Search and Status narrow the list (the API's search and status);
	// Query carries them to the next page.
	Search, Status string
	Query          template.URL
	Secret         string
	NewName        string
	CanNew         bool
	CanRot         bool
	CanDel         bool
	// UseErr says why the keys' use is not shown ("" when it is).
	UseErr string
}

// keysPageSize is how many keys a page shows: one API call per page,
// paged by cursor, however many keys there are.
const keysPageSize = 50

// maxKeySearch is the API's bound on a key search (keys.MaxSearch).
const maxKeySearch = 128

// maxGraceMinutes is the API's bound on a rotation's grace: 30 days.
const maxGraceMinutes = 30 * 24 * 60

// keysPage lists the keys the signed-in key may see, one cursor page at
// a time, and shows a secret just created or rotated once.
func (h *Handler) keysPage(w http.ResponseWriter, r *http.Request, c *ctx) {
	d := &keysData{CanNew: c.can("api_keys.create"), CanRot: c.can("api_keys.update"), CanDel: c.can("api_keys.delete")}
	var flash string
	d.Secret, d.NewName, flash = h.sessions.take(c.id)
	q := url.Values{"page_size": {strconv.Itoa(keysPageSize)}}
	d.Search, d.Status = filterValue(r, "search"), filterValue(r, "status")
	keep := url.Values{}
	if len(d.Search) > maxKeySearch {
		d.Search = d.Search[:maxKeySearch]
	}
	if d.Search != "" {
		q.Set("search", d.Search)
		keep.Set("search", d.Search)
	}
	if d.Status != "" {
		q.Set("status", d.Status)
		keep.Set("status", d.Status)
	}
	if len(keep) > 0 {
		d.Query = template.URL("&" + keep.Encode())
	}
	if a := r.URL.Query().Get("after"); a != "" && len(a) <= 64 {
		q.Set("after", a)
		d.After = a
	}
	var list struct {
		Total   int      `json:"total"`
		Data    []keyRow `json:"data"`
		HasMore bool     `json:"has_more"`
		LastID  string   `json:"last_id"`
	}
	p := &page{Title: "Keys", Flash: flash, Data: d}
	if err := h.getJSON(r, c.s.key, "/api-keys", q, &list); err != nil {
		p.Err = err.Error()
		h.renderFor(w, r, c, statusOf(err), "keys", p)
		return
	}
	d.Keys, d.Total = list.Data, list.Total
	if list.HasMore {
		d.Next = list.LastID
	}
	d.UseErr = h.keysUse(r, c, d.Keys)
	h.renderFor(w, r, c, http.StatusOK, "keys", p)
}

// keysAction runs a keys-page form: create, rotate or revoke. Success
// goes back to the keys page (showing a new secret once); an API refusal
// answers the API's status with its message.
func (h *Handler) keysAction(w http.ResponseWriter, r *http.Request, c *ctx, action string) {
	var (
		method, path string
		body         any
		name         string
	)
	id := r.PostFormValue("id")
	switch action {
	case "create":
		name = strings.TrimSpace(r.PostFormValue("name"))
		typ := r.PostFormValue("type")
		if typ != "organisation" {
			typ = "workspace"
		}
		var scopes []string
		for _, s := range strings.Split(r.PostFormValue("scopes"), ",") {
			if s = strings.TrimSpace(s); s != "" {
				scopes = append(scopes, s)
			}
		}
		if scopes == nil {
			scopes = []string{"completions.write"}
		}
		method, path = http.MethodPost, "/api-keys/"+typ+"/service"
		body = map[string]any{"name": name, "scopes": scopes}
	case "rotate":
		method, path = http.MethodPost, "/api-keys/"+url.PathEscape(id)+"/rotate"
		// Without a grace, the API's default (an hour); a grace given
		// must be within the API's bound.
		g, grace, err := r.PostFormValue("grace_minutes"), int64(60), error(nil)
		if g != "" {
			grace, err = strconv.ParseInt(g, 10, 64)
		}
		if err != nil || grace < 0 || grace > maxGraceMinutes {
			h.refill(w, r, c, http.StatusBadRequest, fmt.Sprintf("the grace period is a number of minutes from 0 to %d (30 days)", maxGraceMinutes), "", "/keys", h.keysPage)
			return
		}
		body = map[string]any{"key_transition_period_ms": grace * 60000}
		name = r.PostFormValue("name")
	case "revoke":
		method, path = http.MethodDelete, "/api-keys/"+url.PathEscape(id)
	default:
		h.fail(w, r, c, http.StatusNotFound, "no such console action")
		return
	}
	if action != "create" && (id == "" || len(id) > 64) {
		h.fail(w, r, c, http.StatusBadRequest, "which key?")
		return
	}
	_, _, raw, err := h.call(r.Context(), r, c.s.key, method, path, nil, body)
	if err != nil {
		// The keys page again, the create form as it was typed.
		form := ""
		if action == "create" {
			form = "create"
		}
		h.refill(w, r, c, statusOf(err), fmt.Sprintf("%s: %v", action, err), form, "/keys", h.keysPage)
		return
	}
	var out struct {
		Key string `json:"key"`
	}
	if action != "revoke" && json.Unmarshal(raw, &out) == nil && out.Key != "" {
		h.sessions.setSecret(c.id, name, out.Key)
	}
	if action == "revoke" {
		h.sessions.setFlash(c.id, "revoked "+id)
	}
	h.redirect(w, r, "/keys")
}
