package handlers

import (
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// identify authenticates the caller of r (x-gateway-api-key, or a gateway
// key sent as Authorization: Bearer, which ingress moved there) and
// applies its key's defaults to hdr (app.Identity.ApplyDefaults, which
// llm_ratelimit applies too). A refused key gets the 401 saying
// why (expired, revoked, disabled, rotated out, unknown, missing).
func (g *Gateway) identify(r *http.Request, hdr *ingress.Headers) (*app.Identity, error) {
	id, ok := g.authenticate(r, hdr.APIKey)
	if !ok {
		return nil, g.app.AuthError(hdr.APIKey)
	}
	id.ApplyDefaults(hdr)
	return id, nil
}

// checkModel refuses a model the caller's key may not use: the body's
// model, or the one GET /v1/models/{id} names.
func checkModel(id *app.Identity, c *providers.Call) error {
	if len(id.AllowedModels) == 0 {
		return nil
	}
	model := c.Model
	if c.Op == providers.OpModels {
		model, _ = strings.CutPrefix(c.Path, "/models/")
		if model == c.Path {
			model = ""
		}
	}
	if model == "" || keys.ModelAllowed(id.AllowedModels, model) {
		return nil
	}
	return modelNotAllowed(model)
}

// refuseModels fails every attempt whose model, as sent (after a config's
// override_params or a prompt's rendering), the caller's key may not use:
// that target answers 403 model_not_allowed without being called, and a
// fallback may try the next. A model list (GET /v1/models) is held and
// narrowed to the models the key may use.
func refuseModels(q *Request) {
	allowed := q.Identity.AllowedModels
	if len(allowed) == 0 {
		return
	}
	list := q.Call.Op == providers.OpModels && q.Call.Path == "/models"
	for i := range q.attempts {
		p := &q.attempts[i]
		if p.err == nil && p.model != "" && !keys.ModelAllowed(allowed, p.model) {
			p.err = modelNotAllowed(p.model)
		}
		if list {
			p.models, p.hold = allowed, p.hold|holdWhole
		}
	}
}

func modelNotAllowed(model string) error {
	e := apierror.Newf(http.StatusForbidden, apierror.TypeInvalidRequest, "the model %s is not allowed for this gateway API key", apierror.QuoteID(model)).WithCode("model_not_allowed")
	e.Param = "model"
	return e
}
