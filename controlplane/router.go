// Package controlplane is the gateway's management API layer: the API
// modules (namespace llm.api.*, one per API: keys, usage limits, ledger,
// prompts, rate limits, feedback) declare their routes, and one Router per
// loaded config, built when the llm app provisions, serves them, in the
// manner of the routes Caddy's own admin API modules declare
// (caddy.AdminRouter). The router is where every management request meets
// the same rules once: one scope check (before any record is looked up),
// one tenancy rule (Call.Workspace, Call.Reaches), one error writer, one
// audit writer. Which site serves it is the operator's choice: llm_gateway
// answers these paths by default (management off stops it) and llm_api
// serves them on any site.
//
// The router also claims the Portkey control-plane APIs the gateway does
// not serve (Unserved), so they are never forwarded to a provider.
package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
)

// Namespace is the Caddy module namespace of the management API modules.
const Namespace = "llm.api"

// Handler answers one management call: a value is written as JSON with the
// route's status (a json.RawMessage as it is), an error by the router's one
// error writer.
type Handler func(*Call) (any, error)

// Route is one management API endpoint.
type Route struct {
	// Method is the HTTP method (GET, POST, PUT, DELETE, PATCH).
	Method string
	// Path is a net/http ServeMux path pattern under /v1/, such as
	// "/v1/api-keys/{id}".
	Path string
	// Scope is what the caller's key must hold (identity.Caller.Can);
	// empty for a route any authenticated caller may call.
	Scope string
	// Status is the status of a successful answer; 0 means 200.
	Status int
	// Handler answers the call.
	Handler Handler
}

// Module is a management API: a Caddy module in namespace llm.api that
// declares its routes. It receives what it needs at provision.
type Module interface {
	caddy.Module
	Routes() []Route
}

// ErrorMapper is implemented by a module whose handlers return errors of
// their own (a store's sentinel errors): MapError turns one into the API
// error the client gets, or returns nil for one the router answers as an
// unavailable store (logged, never shown).
type ErrorMapper interface {
	MapError(error) *apierror.Error
}

// Auditor records a change made through the management API (the audit
// log). A failure to record is its own to log: the change stands.
type Auditor interface {
	Audit(ctx context.Context, actor *identity.Caller, action, resourceType, resourceID, ws, org string, fields []string)
}

// Workspaces tells, for the tenancy rule, whether another organisation
// than own holds workspace ws (its keys or records are there).
type Workspaces interface {
	ForeignOrganisation(ws, own string) (org string, ok bool)
}

// Options are what the router's calls use beside the modules.
type Options struct {
	// NotLoaded are the path prefixes of management APIs registered but
	// not loaded in this config: still claimed (never forwarded to a
	// provider) and answered as the Unserved are.
	NotLoaded  []string
	Auditor    Auditor
	Workspaces Workspaces
	Logger     *zap.Logger
}

// Router serves the management API of one loaded config.
type Router struct {
	mux      *http.ServeMux
	owned    []string // path prefixes ("/v1/api-keys/") of served and unserved APIs
	unserved []string // Unserved and Options.NotLoaded
	opts     Options
	probes   *http.ServeMux // the same patterns without methods: tells 405 from 404
}

// route is a Route as the router holds it, with the module answering it.
type route struct {
	Route
	mapper ErrorMapper
}

var validMethods = map[string]bool{http.MethodGet: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodDelete: true, http.MethodPatch: true}

// Build makes the router of mods. It refuses a route that is malformed
// (no handler, an unknown method, a path not under /v1/ or not a valid
// pattern) or given twice, naming the module.
func Build(mods []Module, opts Options) (rt *Router, err error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	rt = &Router{mux: http.NewServeMux(), probes: http.NewServeMux(), opts: opts}
	seen := make(map[string]string)
	probed := make(map[string]bool)
	// ServeMux panics on a pattern it cannot parse or that conflicts
	// with another; that is a module's bug, refused at provision.
	defer func() {
		if p := recover(); p != nil {
			rt, err = nil, fmt.Errorf("management API routes: %v", p)
		}
	}()
	for _, m := range mods {
		name := string(m.CaddyModule().ID)
		mapper, _ := m.(ErrorMapper)
		for _, r := range m.Routes() {
			if r.Handler == nil || !validMethods[r.Method] || !strings.HasPrefix(r.Path, "/v1/") || strings.ContainsAny(r.Path, " \t") {
				return nil, fmt.Errorf("module %s: malformed route %s %q", name, r.Method, r.Path)
			}
			pattern := r.Method + " " + r.Path
			if other, dup := seen[pattern]; dup {
				return nil, fmt.Errorf("module %s: route %s is also module %s's", name, pattern, other)
			}
			seen[pattern] = name
			h := &route{Route: r, mapper: mapper}
			rt.mux.Handle(pattern, h)
			if shape := pathShape(r.Path); !probed[shape] {
				probed[shape] = true
				rt.probes.Handle(shape, http.NotFoundHandler())
			}
			rt.own(prefixOf(r.Path))
		}
	}
	rt.unserved = append(append(rt.unserved, Unserved...), opts.NotLoaded...)
	for _, p := range rt.unserved {
		rt.own(p)
	}
	return rt, nil
}

// pathShape is a path pattern with its wildcards renamed by position, so
// routes naming one segment differently ({id}, {slug}) share one probe.
func pathShape(path string) string {
	var b strings.Builder
	n := 0
	for {
		i := strings.IndexByte(path, '{')
		j := strings.IndexByte(path, '}')
		if i < 0 || j < i {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i])
		rest := "}"
		if strings.HasSuffix(path[:j], "...") {
			rest = "...}"
		}
		n++
		b.WriteString("{w" + strconv.Itoa(n) + rest)
		path = path[j+1:]
	}
}

// Prefixes are the literal path prefixes of routes, up to the first
// wildcard ("/v1/policies/usage-limits/{id}" → "/v1/policies/usage-limits/"),
// for Options.NotLoaded: narrow enough that a loaded module sharing the
// API's first segments (rate limits beside usage limits) keeps its 405s.
func Prefixes(routes []Route) []string {
	var out []string
	for _, r := range routes {
		p := r.Path
		if i := strings.IndexByte(p, '{'); i >= 0 {
			p = p[:strings.LastIndexByte(p[:i], '/')+1]
		} else {
			p += "/"
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// prefixOf is the API prefix a route path belongs to: its first two
// segments ("/v1/api-keys/{id}" → "/v1/api-keys/").
func prefixOf(path string) string {
	rest := strings.TrimPrefix(path, "/v1/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return "/v1/" + rest + "/"
}

func (rt *Router) own(prefix string) {
	for _, p := range rt.owned {
		if p == prefix {
			return
		}
	}
	rt.owned = append(rt.owned, prefix)
}

// Owns reports whether a request of method for path is a management
// API's (served here or one of the Unserved): the one decision of what a
// control-plane request is, asked by llm_gateway (local answer, body
// bound), llm_ratelimit (never limited) and llm_api. Such a request is
// never forwarded to a provider. A prompt completion lies under the
// prompts API's prefix but is inference, and is not the router's. A nil
// router owns nothing.
func (rt *Router) Owns(method, path string) bool {
	if rt == nil {
		return false
	}
	if _, completion := prompts.CompletionsRef(path); completion && method == http.MethodPost {
		return false
	}
	for _, p := range rt.owned {
		if strings.HasPrefix(path, p) || path == p[:len(p)-1] {
			return true
		}
	}
	return false
}

type callKey struct{}

// Serve answers r, a request for a path Owns reports, as caller, with its
// body already read (bounded by MaxBody).
func (rt *Router) Serve(w http.ResponseWriter, r *http.Request, caller *identity.Caller, body []byte) {
	// Control-plane bodies are JSON, read strictly before any API
	// decodes them: nested at most jsonlimit.MaxDepth levels, and each
	// member named once, names compared as decoded, so that a check an
	// API makes on a member ("no custom_host") reads the member its
	// decoder keeps. Each API reports a body that is not JSON itself.
	if len(body) > 0 && !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		if err := CheckBody(body); err != nil {
			apierror.Write(w, err)
			return
		}
	}
	c := &Call{Request: r, Caller: caller, Body: body, router: rt}
	r = r.WithContext(context.WithValue(r.Context(), callKey{}, c))
	if _, pattern := rt.mux.Handler(r); pattern != "" {
		// ServeHTTP (not the handler found) so the mux sets PathValue.
		rt.mux.ServeHTTP(w, r)
		return
	}
	if rt.isUnserved(r.URL.Path) {
		notServed(w, r.URL.Path)
		return
	}
	// A miss in the OpenAI envelope, telling a wrong method from an
	// unknown path.
	if _, p := rt.probes.Handler(r); p != "" {
		apierror.Write(w, apierror.Newf(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest, "method %s is not allowed on %s", r.Method, apierror.QuotePath(r.URL.Path)))
		return
	}
	apierror.Write(w, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown endpoint %s", apierror.QuotePath(r.URL.Path)))
}

// ServeHTTP is one route's answer: the scope check, the handler, the one
// writer of its value or error.
func (h *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Context().Value(callKey{}).(*Call)
	if c == nil || c.Caller == nil {
		apierror.Write(w, apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, "a gateway API key is required"))
		return
	}
	c.Request = r
	// The scope first: a key without it learns nothing, not even
	// whether the record it names exists.
	if h.Scope != "" && !c.Caller.Can(h.Scope) {
		apierror.Write(w, MissingScope(h.Scope))
		return
	}
	v, err := h.Handler(c)
	if err != nil {
		c.router.writeError(w, r, h.mapper, err)
		return
	}
	var b []byte
	if raw, ok := v.(json.RawMessage); ok {
		b = raw
	} else if b, err = json.Marshal(v); err != nil {
		c.router.writeError(w, r, nil, err)
		return
	}
	status := h.Status
	if status == 0 {
		status = http.StatusOK
	}
	hd := w.Header()
	for k, v := range c.header {
		hd[k] = v
	}
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError is the one error writer: an API error as it is, a module's
// own error as its ErrorMapper says, anything else a store failure —
// logged (its text may name hosts or paths) and answered 503.
func (rt *Router) writeError(w http.ResponseWriter, r *http.Request, m ErrorMapper, err error) {
	var e *apierror.Error
	if !errors.As(err, &e) && m != nil {
		e = m.MapError(err)
	}
	if e == nil {
		rt.opts.Logger.Error("management API: store failure", zap.String("path", r.URL.Path), zap.Error(err))
		e = apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable, "the management API's store is unavailable; try again later")
	}
	apierror.Write(w, e)
}

// MissingScope is the 403 of a key that lacks scope.
func MissingScope(scope string) *apierror.Error {
	return apierror.Newf(http.StatusForbidden, apierror.TypeInvalidRequest,
		"this gateway API key lacks the scope %s", scope).WithCode("missing_scope")
}
