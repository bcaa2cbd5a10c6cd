// Package apiserver is the llm_api HTTP handler: it serves the gateway's
// management API (the llm app's controlplane router: keys, virtual keys,
// configs, prompts, policies, usage limits, logs, analytics, feedback) on
// whatever site the operator puts it, such as an internal listener or a
// separate host behind forward_auth, so a public route can run
// llm_gateway with management off. A caller authenticates with a gateway
// key exactly as on llm_gateway (app.Identify, AuthError).
package apiserver

import (
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

func init() { caddy.RegisterModule(Handler{}) }

// Handler is the llm_api handler. It is terminal: a path that is not the
// management API's is a 404 in the API's envelope, never passed on.
type Handler struct {
	app    *app.App
	router *controlplane.Router
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_api", New: func() caddy.Module { return new(Handler) }}
}

// Provision takes the llm app and its management API router.
func (h *Handler) Provision(ctx caddy.Context) error {
	a, err := app.Get(ctx)
	if err != nil {
		return err
	}
	h.app, h.router, h.logger = a, a.ControlPlane(), ctx.Logger()
	return nil
}

// ServeHTTP authenticates the caller, reads the body (bounded by
// controlplane.MaxBody) and hands the request to the router; every
// request it answers is recorded as llm_gateway records a management
// call (record).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	sw := &statusWriter{ResponseWriter: w}
	e := &observe.Entry{Start: time.Now(), Operation: controlplane.OpControl, Method: r.Method,
		Path: strings.TrimPrefix(r.URL.Path, "/v1"), TraceID: newTraceID()}
	defer h.record(r, sw, e)
	fail := func(err *apierror.Error) {
		e.Error, e.Refusal = err.Message, observe.RefusalOf(err)
		apierror.Write(sw, err)
	}
	if !h.router.Owns(r.Method, r.URL.Path) {
		fail(apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown endpoint %s", apierror.QuotePath(r.URL.Path)))
		return nil
	}
	key := ingress.GatewayKey(r.Header)
	id, ok := h.app.Identify(r.Context(), key)
	if !ok {
		fail(h.app.AuthError(key))
		return nil
	}
	e.KeyName, e.Workspace, e.Organisation = id.Name, id.WorkspaceID, id.OrganisationID
	body, err := controlplane.ReadBody(sw, r, controlplane.MaxBody)
	if err != nil {
		fail(apierror.As(err))
		return nil
	}
	h.router.Serve(sw, r, id, body)
	return nil
}

// record writes the call's entry the way llm_gateway writes every
// request's (handlers' endFlight): to the usage ledger, which keeps no
// management call (ledger.recordable), then to the metrics and the log
// once (in the site's access log line when it logs, else the gateway's
// own "llm request" line).
func (h *Handler) record(r *http.Request, sw *statusWriter, e *observe.Entry) {
	e.Status = sw.status
	if e.Status == 0 {
		e.Status = http.StatusOK
	}
	h.app.UsageLedger().Record(e)
	e.Log(r, h.logger)
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// newTraceID names the call in the log, as llm_gateway names a request
// that brought no trace id: a UUIDv7.
func newTraceID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
