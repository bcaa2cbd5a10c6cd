// Package apiserver is the llm_api HTTP handler: it serves the gateway's
// management API (the llm app's controlplane router: keys, virtual keys,
// configs, prompts, policies, usage limits, logs, analytics, feedback) on
// whatever site the operator puts it, such as an internal listener or a
// separate host behind forward_auth, so a public route can run
// llm_gateway with management off. A caller authenticates with a gateway
// key exactly as on llm_gateway (app.Identify, AuthError).
package apiserver

import (
	"errors"
	"io"
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
	body, err := readBody(w, r)
	if err != nil {
		apierror.Write(w, apierror.As(err))
		return nil
	}
	h.router.Serve(w, r, id, body)
	return nil
}

// readBody reads the whole body, at most controlplane.MaxBody bytes: the
// management APIs keep what they read, and none needs more.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > controlplane.MaxBody {
		return nil, tooLarge()
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, controlplane.MaxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge()
	case err != nil:
		return nil, apierror.New(http.StatusBadRequest, apierror.TypeInvalidRequest, "could not read the request body")
	}
	return b, nil
}

func tooLarge() error {
	return apierror.Newf(http.StatusRequestEntityTooLarge, apierror.TypeInvalidRequest,
		"request body exceeds the gateway's limit of %d bytes", controlplane.MaxBody).WithCode("request_too_large")
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
