package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// PromptCompletionStatus is the status field of a successful, non-streamed
// prompt completion. The spec gives the envelope {status, headers, body}
// but not status's values; the reference service answers "success", and
// only successes are wrapped: a failure (a provider's error, a gateway
// error) keeps the OpenAI error envelope and its HTTP status, as every
// other inference endpoint does, so clients need one error path.
const PromptCompletionStatus = "success"

// promptCompletion makes q the chat completion POST
// /v1/prompts/{ref}/completions stands for: the prompt version ref names,
// rendered with the body's variables and overrides. It then takes the
// whole inference pipeline, so routing, retries, the cache, rate-limit
// settlement and logging behave exactly as for /v1/chat/completions.
func (g *Gateway) promptCompletion(r *http.Request, q *Request, ref string) error {
	c := &q.Call
	if err := jsonlimit.Object(c.Body); err != nil && len(c.Body) > 0 {
		return bodyJSONError(err, "the request body must be a JSON object: "+err.Error())
	}
	p, v, err := prompts.Resolve(r.Context(), g.app.PromptRegistry(), q.Identity.WorkspaceID, ref)
	if err != nil {
		return err
	}
	q.Prompt = promptUse{id: p.ID, version: v.Number}
	body, err := prompts.RenderRequest(p, v, c.Body)
	if err != nil {
		return err
	}
	// A config target with prompt_id renders its own prompt from the
	// client's variables and overrides, not from this rendering.
	q.varsBody = c.Body
	c.Op, c.Method, c.Path, c.RawQuery = providers.OpChat, http.MethodPost, "/chat/completions", ""
	c.Body = body
	c.Model = gjson.GetBytes(body, "model").String()
	c.Stream = gjson.GetBytes(body, "stream").Bool()
	q.Envelope = !c.Stream

	q.RouteHeader = promptHeaders(q.Header, &v.Target)
	if q.RouteHeader != q.Header && v.Provider != "" {
		var cfg routing.Config
		if err = json.Unmarshal(v.Target.ConfigObject(), &cfg); err != nil {
			return apierror.Newf(http.StatusInternalServerError, apierror.TypeServer, "prompt %q version %d: unusable provider settings", p.Slug, v.Number)
		}
		q.promptConfig = &cfg
	}
	return nil
}

// promptHeaders returns the headers to plan a prompt completion from. A
// request that names its provider in any of the spec's four ways (a
// config, a virtual key, or a provider slug, with Authorization or a
// custom host) is routed by its own headers: the caller chose, and the
// prompt's saved settings are only a default. Otherwise the version's
// virtual key or saved config id stand in for the missing header; a
// provider slug is planned by the caller with ConfigObject. A version
// that names nothing leaves the headers as they are (and the request
// fails as any chat completion without a provider does).
func promptHeaders(h *ingress.Headers, t *prompts.Target) *ingress.Headers {
	if h.Config != "" || h.VirtualKey != "" || h.Provider != "" || t.IsZero() {
		return h
	}
	h2 := *h
	switch {
	case t.VirtualKey != "":
		h2.VirtualKey = t.VirtualKey
	case t.ConfigID != "":
		h2.Config = t.ConfigID
	}
	return &h2
}

// takeVariables prepares a /v1/chat/completions call whose config has
// prompt_id targets: the body's variables (and its other fields, as
// overrides) render each such target's prompt, and no provider is sent
// the gateway-only variables field.
func takeVariables(q *Request) {
	c := &q.Call
	if c.Op != providers.OpChat || q.varsBody != nil || !hasPromptTarget(q.Plan) {
		return
	}
	// The template gives the messages; SDKs that require messages send
	// some anyway, and they are not the prompt's.
	q.varsBody, _ = sjson.DeleteBytes(c.Body, "messages")
	if gjson.GetBytes(c.Body, "variables").Exists() {
		c.Body, _ = sjson.DeleteBytes(c.Body, "variables")
	}
}

func hasPromptTarget(p *routing.Plan) bool {
	for _, t := range p.Leaves {
		if t.PromptID != "" {
			return true
		}
	}
	return false
}

// renderTarget renders t's prompt_id with the client's variables: a pure
// function of the request and the target. The stream flag follows the
// client's request whatever the version saved, because the client reads
// the answer in the form it asked for.
func renderTarget(ctx context.Context, reg *prompts.Registry, q *Request, t *routing.Target) ([]byte, promptUse, error) {
	p, v, err := prompts.Resolve(ctx, reg, q.Identity.WorkspaceID, t.PromptID)
	if err != nil {
		return nil, promptUse{}, routing.PromptTargetError(t, err)
	}
	use := promptUse{id: p.ID, version: v.Number}
	src := q.varsBody
	if src == nil {
		src = q.Call.Body
	}
	body, err := prompts.RenderRequest(p, v, src)
	if err != nil {
		return nil, use, routing.PromptTargetError(t, err)
	}
	if q.Call.Stream {
		body, err = sjson.SetBytes(body, "stream", true)
	} else {
		body, err = sjson.DeleteBytes(body, "stream")
	}
	return body, use, err
}

// promptEnvelope wraps a successful prompt completion's answer as
// {"status", "headers", "body"}, and returns the headers to send with it.
func promptEnvelope(header http.Header, body []byte) (http.Header, []byte) {
	headers := make(map[string]string, 8)
	for k, v := range header {
		if name := strings.ToLower(k); safePromptHeader(name) {
			headers[name] = strings.Join(v, ", ")
		}
	}
	hj, _ := json.Marshal(headers)
	out := make([]byte, 0, len(body)+len(hj)+48)
	out = append(out, `{"status":`...)
	out = strconv.AppendQuote(out, PromptCompletionStatus)
	out = append(out, `,"headers":`...)
	out = append(out, hj...)
	out = append(out, `,"body":`...)
	out = append(out, body...)
	out = append(out, '}')

	h := make(http.Header, len(header))
	for k, v := range header {
		if name := strings.ToLower(k); name != "content-type" && safePromptHeader(name) {
			h[k] = v
		}
	}
	h.Set("Content-Type", "application/json")
	return h, out
}

// safePromptHeader reports whether a provider or gateway response header
// (lower-case) is echoed in the envelope's headers: the body's type, the
// gateway's own headers, request ids and rate-limit state. Nothing else
// is, since provider headers may describe internal infrastructure.
func safePromptHeader(name string) bool {
	switch {
	case name == "content-type", name == "x-request-id", name == "retry-after":
		return true
	case strings.HasPrefix(name, ingress.Prefix), strings.HasPrefix(name, ingress.AliasPrefix),
		strings.HasPrefix(name, "x-ratelimit-"):
		return true
	}
	return false
}
