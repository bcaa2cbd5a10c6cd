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

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
)

func init() { caddy.RegisterModule(Handler{}) }

// Handler is the llm_api handler. It is terminal: a path that is not the
// management API's is a 404 in the API's envelope, never passed on.
type Handler struct {
	app    *app.App
	router *controlplane.Router
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
	h.app, h.router = a, a.ControlPlane()
	return nil
}

// ServeHTTP authenticates the caller, reads the body (bounded by
// controlplane.MaxBody) and hands the request to the router.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if !h.router.Owns(r.Method, r.URL.Path) {
		apierror.Write(w, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown endpoint %s", apierror.QuotePath(r.URL.Path)))
		return nil
	}
	key := ingress.GatewayKey(r.Header)
	id, ok := h.app.Identify(r.Context(), key)
	if !ok {
		apierror.Write(w, h.app.AuthError(key))
		return nil
	}
	body, err := controlplane.ReadBody(w, r, controlplane.MaxBody)
	if err != nil {
		apierror.Write(w, apierror.As(err))
		return nil
	}
	h.router.Serve(w, r, id, body)
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
