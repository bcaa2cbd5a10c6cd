package handlers

import (
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity/handoff"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// identify authenticates the caller of r and applies its key's defaults
// to hdr. The gateway key is x-gateway-api-key, else the client's own API
// key (Authorization: Bearer or x-api-key, whatever the key's origin),
// as ingress read it; the defaults are ingress.Headers.ApplyDefaults, which
// llm_ratelimit applies too. A refused key gets the 401 saying why
// (expired, revoked, disabled, rotated out, unknown, missing).
func (g *Gateway) identify(r *http.Request, hdr *ingress.Headers) (*identity.Caller, error) {
	if id, ok := handoff.From(r.Context()).Given(g.app.Issuer()); ok {
		g.asCreator(hdr, r.Header, id)
		return id, nil
	}
	id, ok := g.authenticate(r, hdr.APIKey)
	if !ok {
		e := g.app.AuthError(hdr.APIKey)
		if hdr.KeyFrom != ingress.KeyFromHeader && e.Code == "invalid_api_key" {
			// Say where the key was read from: a client that sent its
			// provider key alone learns where the gateway key goes.
			e.Message += ": without an " + ingress.Prefix + ingress.APIKey + " header, the key sent as " +
				keySource[hdr.KeyFrom] + " is taken as the gateway key (send a provider key of your own beside " +
				ingress.Prefix + ingress.APIKey + ")"
		}
		return nil, e
	}
	hdr.ApplyDefaults(id.Defaults)
	return id, nil
}

// asCreator reads hdr (parsed from header) as the headers of a run
// without a client (a managed batch line, a native batch's job) made as
// its creator id, which sends no gateway key: a token ingress took for
// one is the creator's provider key, unless the gateway knows it as a key
// (a creator that authenticated with Authorization: Bearer).
func (g *Gateway) asCreator(hdr *ingress.Headers, header http.Header, id *identity.Caller) {
	if hdr.KeyFrom != ingress.KeyFromHeader {
		if _, known := g.app.Authenticate(hdr.APIKey); !known {
			hdr.AsProviderKey(header)
		}
	}
	hdr.ApplyDefaults(id.Defaults)
}

// keySource names, for a 401, the header a gateway key was read from.
var keySource = map[string]string{
	ingress.KeyFromAuthorization: "Authorization: Bearer",
	ingress.KeyFromXAPIKey:       "x-api-key",
}

// checkModel refuses a model the caller's key may not use: the body's
// model, or the one GET /v1/models/{id} names.
func checkModel(id *identity.Caller, c *providers.Call) error {
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
	if model == "" && c.Op != providers.OpModels {
		// A multipart upload, a passed-through API or a provider-native
		// path names its model where the parse did not read it.
		m, err := namedModel(c)
		if err != nil {
			return err
		}
		model = m
	}
	if model == "" && mintsClientSecret(c) {
		// The provider would pick its default model: a key limited
		// to models names the one the secret is for.
		e := apierror.New(http.StatusForbidden, apierror.TypeInvalidRequest,
			"this gateway API key may use only some models: name the realtime model in session.model").WithCode("model_not_allowed")
		e.Param = "session.model"
		return e
	}
	if model == "" || id.AllowsModel(model) {
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
		if p.err == nil && p.model != "" && !identity.ModelAllowed(allowed, p.model) {
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
