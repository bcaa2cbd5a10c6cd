// Package mcp is the llm_mcp Caddy handler: the gateway's MCP endpoint.
// It serves, to callers holding a gateway key, the tools and prompts of
// the remote MCP servers declared in the llm app (`mcp_server`): /mcp
// aggregates every server the caller's key may use, under names
// <server>__<name>, and /mcp/{server} serves one under its own names.
//
// A request goes (ServeHTTP):
//
//	route     /mcp or /mcp/{server}                       (route.go)
//	identify  the gateway key, as llm_gateway reads it     (auth.go)
//	read      the JSON-RPC message, strictly               (strict.go)
//	view      the SDK server of the caller's servers       (view.go)
//	refuse    a tools/call or prompts/get of a name the view lacks
//	limit     a tools/call through the rate and usage limits (limits.go)
//	answer    a tools/call itself, posted raw upstream    (direct.go,
//	          rawcall.go), when nothing needs the SDK
//	serve     else the go-sdk's stateless Streamable HTTP handler, whose
//	          tool and prompt handlers relay to the server (relay.go)
//	record    one log entry per tools/call, prompts/get, and one ledger
//	          record per tools/call                        (record.go,
//	          limits.go)
//
// Serving is stateless (the SDK's Stateless option): no session lives
// in an instance, so any replica behind one address serves any request of
// a client's session. The upstream side keeps one SDK client session per
// server and handler, opened on first use (remote.go).
package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// DefaultMaxRequestBody bounds a client's JSON-RPC message unless
// max_request_body says otherwise.
const DefaultMaxRequestBody = 4 << 20

// Handler is the llm_mcp HTTP handler (module http.handlers.llm_mcp). It
// always answers; it never calls the next handler.
type Handler struct {
	// EgressAllow lets this route's servers be reached on addresses the
	// egress guard refuses by default (custom_host_allow's vocabulary:
	// loopback, private, link_local, any, CIDRs). By default only public
	// addresses are, checked on the resolved address at dial time.
	EgressAllow []string `json:"egress_allow,omitempty"`
	// MaxRequestBody bounds a client's message (default 4 MiB).
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	app      *app.App
	logger   *zap.Logger
	cancel   context.CancelFunc
	servers  map[string]*remote
	order    []*remote // by name
	progress *progressRoutes
	views    *viewCache
	serve    http.Handler
	// budget is the usage-limit stage (limits.go).
	budget app.BudgetStage
}

func init() {
	caddy.RegisterModule(Handler{})
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_mcp",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision finds the llm app's declared servers and prepares their
// upstreams behind this route's egress guard. Nothing connects yet.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if err := RegisterMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	if h.MaxRequestBody == 0 {
		h.MaxRequestBody = DefaultMaxRequestBody
	}
	if h.MaxRequestBody < 0 {
		return fmt.Errorf("max_request_body must be positive")
	}
	guard, err := upstream.NewGuard(h.EgressAllow)
	if err != nil {
		return fmt.Errorf("egress_allow: %v", err)
	}
	a, err := ctx.App(app.ID)
	if err != nil {
		return err
	}
	h.app = a.(*app.App)
	if h.budget, err = app.LoadBudgetStage(ctx); err != nil {
		return err
	}
	// The upstreams' sessions live until the config is unloaded.
	life, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.progress = newProgressRoutes()
	h.views = newViewCache()
	h.servers = make(map[string]*remote)
	for _, cfg := range h.app.MCPServerConfigs() {
		u := newRemote(life, cfg, guard, h.progress)
		h.servers[cfg.Name] = u
		h.order = append(h.order, u)
	}
	h.serve = sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		if v := viewFrom(r.Context()); v != nil {
			return v.server
		}
		return nil
	}, &sdk.StreamableHTTPOptions{
		// Any replica serves any request: nothing of a client's session
		// is kept between requests.
		Stateless: true,
		// A caller that goes away cancels its call upstream.
		PropagateRequestCancellation: true,
		MaxRequestBodyBytes:          h.MaxRequestBody,
		// The SDK refuses loopback connections whose Host is not
		// loopback (DNS rebinding against unauthenticated local
		// servers). Every request here is authenticated by a gateway
		// key first, and a gateway behind a local proxy sees exactly
		// such requests.
		DisableLocalhostProtection: true,
	})
	return nil
}

// Cleanup closes the upstream sessions.
func (h *Handler) Cleanup() error {
	if h.cancel != nil {
		h.cancel()
	}
	for _, u := range h.order {
		u.close()
	}
	return nil
}

// ServeHTTP serves one MCP request (see the package's flow).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	name, ok := routeOf(r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, nil, codeNotFound, "no MCP endpoint here: use /mcp or /mcp/{server}", nil)
		return nil
	}
	id, aerr := h.identify(r)
	if aerr != nil {
		writeError(w, aerr.Status, nil, codeUnauthorized, aerr.Message, map[string]any{"code": aerr.Code})
		return nil
	}
	ups := h.visible(id, name)
	if ups == nil {
		// An unknown server and one the key may not use answer alike, so
		// a key learns nothing of servers it cannot use.
		writeError(w, http.StatusNotFound, nil, codeNotFound, fmt.Sprintf("no MCP server %q for this gateway API key", name), nil)
		return nil
	}
	if r.Method != http.MethodPost {
		// Stateless serving has no GET stream nor DELETE: the SDK
		// answers 405 with Allow: POST.
		h.serve.ServeHTTP(w, r)
		return nil
	}
	msg, merr := readMessage(r, h.MaxRequestBody)
	if merr != nil {
		writeError(w, merr.status, merr.id, merr.code, merr.message, nil)
		return nil
	}
	v, err := h.view(r.Context(), ups, name != "")
	if err != nil {
		writeError(w, http.StatusOK, msg.id, codeUnavailable, err.Error(), map[string]any{"server": name})
		return nil
	}
	var (
		rec    *callRecord
		target ref
	)
	if msg.method == methodCallTool || msg.method == methodGetPrompt {
		rec = newCallRecord(id, msg)
		var found bool
		target, found = v.lookup(msg.method, msg.name)
		if !found {
			rec.setStatus(statusDenied, codeInvalidParams)
			cw := &countingWriter{ResponseWriter: w}
			writeError(cw, http.StatusOK, msg.id, codeInvalidParams, fmt.Sprintf("unknown %s %q", kindOf(msg.method), msg.name), nil)
			h.endCall(r, nil, rec, cw.n)
			return nil
		}
		rec.Server, rec.Upstream = target.u.cfg.Name, target.name
	}
	var m *metered
	if msg.method == methodCallTool {
		cw := &countingWriter{ResponseWriter: w}
		var ok bool
		if m, ok = h.admit(cw, r, id, msg, rec); !ok {
			h.endCall(r, m, rec, cw.n)
			return nil
		}
		if p, direct := directCall(r, msg); direct && msg.id != nil {
			ctx := withRecord(withView(r.Context(), v), rec)
			h.answerCall(cw, r.WithContext(ctx), msg.id, target, p)
			h.endCall(r, m, rec, cw.n)
			return nil
		}
	}
	ctx := withView(r.Context(), v)
	if rec != nil {
		ctx = withRecord(ctx, rec)
	}
	r = r.WithContext(ctx)
	r.Body = io.NopCloser(bytes.NewReader(msg.body))
	r.ContentLength = int64(len(msg.body))
	cw := &countingWriter{ResponseWriter: w}
	h.serve.ServeHTTP(cw, r)
	if rec != nil {
		h.endCall(r, m, rec, cw.n)
	}
	return nil
}

// endCall records a tools/call or prompts/get once its answer of n bytes
// is written: the log entry, the metric and, for a tools/call, the
// settlement of its limits and its ledger record (m is nil when it was
// refused before the limits). A record no relay set is a message the SDK
// refused (a malformed call, a header that contradicts the body).
func (h *Handler) endCall(r *http.Request, m *metered, rec *callRecord, n int64) {
	rec.finish(n)
	h.logCall(r, rec)
	observeServer(rec)
	if rec.Method == methodCallTool {
		h.done(r, m, rec)
	}
}

// visible returns the upstreams the holder of id may use on the route:
// every allowed one for /mcp (name ""), the named one for /mcp/{name};
// nil when there is none.
func (h *Handler) visible(id *identity.Caller, name string) []*remote {
	if name != "" {
		if u := h.servers[name]; u != nil && u.cfg.Allows(id) {
			return []*remote{u}
		}
		return nil
	}
	out := make([]*remote, 0, len(h.order))
	for _, u := range h.order {
		if u.cfg.Allows(id) {
			out = append(out, u)
		}
	}
	return out
}

// countingWriter counts the bytes of the answer. Unwrap lets the SDK's
// http.ResponseController flush server-sent events through it.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
