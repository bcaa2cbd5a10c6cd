// Package ledgerapi serves the usage ledger over the control plane in the
// reference's shapes: the analytics graphs and groups, the logs listing
// and GET /v1/usage/me. Every answer is scoped to the caller: a
// workspace key sees its workspace, an organisation key its
// organisation (narrowed by workspace_slug when given).
package ledgerapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
)

// Scopes an API key needs (a Caddyfile key without scopes has all).
const (
	scopeAnalytics = "analytics.view"
	scopeLogs      = "logs.view"
)

// Paging bounds.
const (
	defaultPageSize = 20
	maxPageSize     = 100
	// maxPage bounds current_page, so an offset stays a cheap query.
	maxPage = 10_000
)

// maxRange is the longest time range a query may cover.
const maxRange = 400 * 24 * time.Hour

// queryTimeout bounds one API call's database work.
const queryTimeout = 15 * time.Second

func init() { caddy.RegisterModule(Module{}) }

// Module is the llm.api.ledger module: analytics, logs and usage/me.
type Module struct {
	app *app.App
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: controlplane.Namespace + ".ledger", New: func() caddy.Module { return new(Module) }}
}

// Provision takes the llm app, whose ledger the routes read.
func (m *Module) Provision(ctx caddy.Context) error {
	a, err := app.Get(ctx)
	m.app = a
	return err
}

// Routes implements controlplane.Module.
func (m *Module) Routes() []controlplane.Route {
	var out []controlplane.Route
	add := func(path, scope string, needsDB bool, h handler) {
		out = append(out, controlplane.Route{Method: http.MethodGet, Path: path, Scope: scope, Handler: m.serve(needsDB, h)})
	}
	analyticsRoutes(add)
	logRoutes(add)
	return out
}

// handler is one API: it answers with a value to encode, or an error.
type handler func(c *call) (any, error)

// call is one API request.
type call struct {
	r   *http.Request
	id  *identity.Caller
	cp  *controlplane.Call
	app *app.App
	// db is nil only for APIs that answer without a ledger (usage/me).
	db *ledger.DB
	q  url.Values
}

// serve adapts h to the control plane: needsDB false lets h answer
// without a ledger; its database work is bounded by queryTimeout.
func (m *Module) serve(needsDB bool, h handler) controlplane.Handler {
	return func(cp *controlplane.Call) (any, error) {
		db := m.app.LedgerDB()
		if db == nil && needsDB {
			return nil, apierror.New(http.StatusNotFound, apierror.TypeNotFound,
				"the usage ledger is not configured: add the ledger option to the llm app").WithCode("ledger_not_configured")
		}
		ctx, cancel := context.WithTimeout(cp.Context(), queryTimeout)
		defer cancel()
		r := cp.Request.WithContext(ctx)
		return h(&call{r: r, id: cp.Caller, cp: cp, app: m.app, db: db, q: r.URL.Query()})
	}
}

// MapError implements controlplane.ErrorMapper: a query over its time
// is a 504; other database errors (they may name hosts or users) are the
// router's 503, logged, not shown.
func (*Module) MapError(err error) *apierror.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return apierror.New(http.StatusGatewayTimeout, apierror.TypeTimeout, "the usage ledger query took too long; narrow the time range or filters")
	}
	return nil
}

// filter reads the caller's scope and the reference's filter parameters.
// timeRequired makes time_of_generation_min/max default to the last 7
// days when absent (analytics); logs leave an absent bound open.
func (c *call) filter(timeRequired bool) (*ledger.Filter, error) {
	f := &ledger.Filter{Organisation: c.id.OrganisationID}
	ws := c.q.Get("workspace_slug")
	if ws == "" {
		ws = c.q.Get("workspace_id")
	}
	// The tenancy rule: a workspace key reads its workspace, an
	// organisation key its whole organisation or one of its workspaces,
	// never another organisation's.
	var err error
	if f.Workspace, err = c.cp.Workspace(ws); err != nil {
		return nil, err
	}
	if ws == "" && c.id.Type == keys.TypeOrganisation {
		f.Workspace = ""
	}
	if f.From, err = c.time("time_of_generation_min"); err != nil {
		return nil, err
	}
	if f.To, err = c.time("time_of_generation_max"); err != nil {
		return nil, err
	}
	if timeRequired {
		if f.To.IsZero() {
			f.To = time.Now()
		}
		if f.From.IsZero() {
			f.From = f.To.Add(-7 * 24 * time.Hour)
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() {
		if !f.From.Before(f.To) {
			return nil, apierror.BadRequest("time_of_generation_min", "must be before time_of_generation_max")
		}
		if f.To.Sub(f.From) > maxRange {
			return nil, apierror.BadRequest("time_of_generation_min", "the time range may cover at most 400 days")
		}
	}
	lists := []struct {
		param string
		dst   *[]string
	}{
		{"api_key_ids", &f.APIKeys}, {"ai_org_model", &f.Models}, {"virtual_keys", &f.VirtualKeys},
		{"configs", &f.Configs}, {"cache_status", &f.CacheStates}, {"providers", &f.Providers},
	}
	for _, l := range lists {
		if *l.dst, err = c.list(l.param); err != nil {
			return nil, err
		}
	}
	// ai_org_model is "provider__model" in the reference; a bare model
	// name is accepted too.
	for i, m := range f.Models {
		if _, model, ok := strings.Cut(m, "__"); ok {
			f.Models[i] = model
		}
	}
	codes, err := c.list("status_code")
	if err != nil {
		return nil, err
	}
	for _, s := range codes {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return nil, apierror.BadRequest("status_code", "must be comma-separated HTTP status codes")
		}
		f.Statuses = append(f.Statuses, n)
	}
	if f.TraceID = c.q.Get("trace_id"); len(f.TraceID) > ledger.MaxField {
		return nil, apierror.BadRequest("trace_id", "is too long")
	}
	if md := c.q.Get("metadata"); md != "" {
		if len(md) > 4096 || json.Unmarshal([]byte(md), &f.Metadata) != nil {
			return nil, apierror.BadRequest("metadata", "must be a JSON object of string values, at most 4096 bytes")
		}
		if len(f.Metadata) > 16 {
			return nil, apierror.BadRequest("metadata", "may filter on at most 16 keys")
		}
		for k := range f.Metadata {
			if !ledger.ValidMetadataKey(k) {
				return nil, apierror.BadRequest("metadata", "keys must be 1 to 64 letters, digits, '_', '-' or '.'")
			}
		}
	}
	return f, nil
}

// time parses an ISO 8601 time parameter.
func (c *call) time(param string) (time.Time, error) {
	v := c.q.Get(param)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, apierror.BadRequest(param, "must be an ISO 8601 time such as 2026-02-23T14:20:31+05:30")
	}
	return t, nil
}

// list parses a comma-separated parameter, bounded.
func (c *call) list(param string) ([]string, error) {
	v := c.q.Get(param)
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > ledger.MaxListFilter {
		return nil, apierror.BadRequest(param, "may list at most %d values", ledger.MaxListFilter)
	}
	out := parts[:0]
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if len(p) > ledger.MaxField {
			return nil, apierror.BadRequest(param, "values must be at most %d bytes", ledger.MaxField)
		}
		if p != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

// page reads page_size and current_page (from 0).
func (c *call) page() (limit, offset int, err error) {
	limit, page := defaultPageSize, 0
	if v := c.q.Get("page_size"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxPageSize {
			return 0, 0, apierror.BadRequest("page_size", "must be a whole number from 1 to %d", maxPageSize)
		}
	}
	if v := c.q.Get("current_page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 0 || page > maxPage {
			return 0, 0, apierror.BadRequest("current_page", "must be a whole number from 0 to %d", maxPage)
		}
	}
	return limit, page * limit, nil
}

// cents is a nano-dollar amount in US cents, the reference's cost unit.
func cents(nano int64) float64 { return float64(nano) / (ledger.NanoUSD / 100) }

// usd formats a nano-dollar amount as exact decimal dollars.
func usd(nano int64) string {
	s := strconv.FormatInt(nano, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for len(s) < 10 {
		s = "0" + s
	}
	out := strings.TrimRight(s[:len(s)-9]+"."+s[len(s)-9:], "0")
	out = strings.TrimSuffix(out, ".")
	if neg {
		out = "-" + out
	}
	return out
}
