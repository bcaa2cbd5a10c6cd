package handlers

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Local answers. Some requests are answered by the gateway itself, never
// by a provider: the control-plane APIs (rate-limit policies, prompts,
// feedback, and whatever else registers with package controlplane), the
// gateway's file store and managed batches, the Responses it stored, and
// the token count of a Messages or Responses call no target can count
// (counttokens.go).
// Each such API is one entry of localAPIs; the pipeline asks them once,
// after parsing and before planning:
//
//	parse ─ local? ─ yes → the local answer, written by the responder
//	               ─ no  → plan ─ run
//
// An API that is not local for a request (a provider's file, a response
// id the store does not know) says so and the request is routed.

// localAPI is one API the gateway answers itself.
type localAPI struct {
	// name says which API it is, for tests and errors.
	name string
	// answer returns the answer to q, or nil when q is not this API's
	// (or not local: it is then routed). A returned error is the
	// client's answer.
	answer func(g *Gateway, r *http.Request, q *Request) (*localAnswer, error)
}

// localAnswer is how the gateway answers a request itself: either serve
// writes the answer (a control-plane handler), or held is the complete
// answer, written as a provider's held answer would be.
type localAnswer struct {
	// op is the operation the log entry records.
	op    providers.Operation
	serve func(w http.ResponseWriter)
	held  *heldAnswer
}

// localAPIs are the APIs the gateway answers itself, asked in order. The
// first that claims a request answers it.
var localAPIs = [...]localAPI{
	{name: "control", answer: (*Gateway).controlPlane},
	{name: "jobs", answer: (*Gateway).localJobs},
	{name: "responses", answer: (*Gateway).storedResponse},
	{name: "count_tokens", answer: (*Gateway).countEstimate},
	{name: "input_tokens", answer: (*Gateway).responsesInputTokens},
	{name: "models", answer: (*Gateway).aliasModels},
}

// local asks the local APIs for q's answer; nil when q is to be routed.
func (g *Gateway) local(r *http.Request, q *Request) (*localAnswer, error) {
	for i := range localAPIs {
		if a, err := localAPIs[i].answer(g, r, q); a != nil || err != nil {
			return a, err
		}
	}
	return nil, nil
}

// opControl is the logged operation of a control-plane call.
const opControl = controlplane.OpControl

// controlPlane answers the management API (the llm app's router), as the
// authenticated caller, unless the route has management off: then it is a
// 404, never a provider's call. Their paths are no inference operation's;
// a prompt completion lies under the prompts API's prefix but is not the
// router's (Owns), and parse made it a chat completion, so it is routed.
func (g *Gateway) controlPlane(r *http.Request, q *Request) (*localAnswer, error) {
	rt := g.management
	if q.Call.Op != providers.OpProxy || !rt.Owns(r.Method, r.URL.Path) {
		return nil, nil
	}
	if g.ManagementOff {
		return nil, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown endpoint %s", apierror.QuotePath(r.URL.Path))
	}
	id, body := q.Identity, q.Call.Body
	return &localAnswer{op: opControl, serve: func(w http.ResponseWriter) {
		rt.Serve(w, r, id, body)
	}}, nil
}

// writeLocal writes a local answer to the client through the responder.
func (f *flight) writeLocal(a *localAnswer) {
	if a.held != nil {
		f.out.held(a.held, nil, false)
		return
	}
	f.out.control(a.serve)
}

// unrouted reports whether h names no routing: no config, virtual key or
// provider, so a model alias may.
func unrouted(h *ingress.Headers) bool {
	return h == nil || h.Config == "" && h.VirtualKey == "" && h.Provider == ""
}

// aliasHeader returns the routing headers of a request naming a model
// alias (the llm app's model <alias>) and no routing of its own: q's,
// with the alias's saved config as x-gateway-config. Nil otherwise.
func (g *Gateway) aliasHeader(q *Request) *ingress.Headers {
	if q.Call.Model == "" || !unrouted(q.RouteHeader) {
		return nil
	}
	id, ok := g.app.ModelAlias(q.Identity, q.Call.Model)
	if !ok {
		return nil
	}
	h := new(ingress.Headers)
	if q.RouteHeader != nil {
		*h = *q.RouteHeader
	}
	h.Config = id
	return h
}

// aliasModels answers GET /v1/models without routing headers when model
// aliases are configured: the aliases the caller's key may use, and the
// models its allow-list names literally (a pattern names no model), in
// OpenAI's list shape. With routing headers the list is the provider's.
func (g *Gateway) aliasModels(_ *http.Request, q *Request) (*localAnswer, error) {
	if q.Call.Op != providers.OpModels || q.Call.Path != "/models" || q.Call.Method != http.MethodGet || !unrouted(q.RouteHeader) {
		return nil, nil
	}
	aliases := g.app.ModelAliases(q.Identity)
	if len(aliases) == 0 {
		return nil, nil
	}
	var allowed []string
	if q.Identity != nil {
		allowed = q.Identity.AllowedModels
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	seen := map[string]bool{}
	for _, a := range aliases {
		if identity.ModelAllowed(allowed, a) {
			list.Data = append(list.Data, model{ID: a, Object: "model", OwnedBy: "gateway"})
			seen[a] = true
		}
	}
	for _, m := range allowed {
		if !seen[m] && !strings.ContainsAny(m, "*?[\\") {
			list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "gateway"})
			seen[m] = true
		}
	}
	body, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	return &localAnswer{op: providers.OpModels, held: &heldAnswer{status: http.StatusOK, header: h, body: body}}, nil
}
