package handlers

import (
	"bytes"
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

// promptUse names a prompt version whose rendering was sent, for the log.
type promptUse struct {
	id      string
	version int
}

// servePromptCompletion serves POST /v1/prompts/{ref}/completions: it
// renders the prompt version ref names with the body's variables and
// overrides, then runs the result through the inference pipeline as a
// chat completion, so routing, retries, the cache, rate-limit settlement
// and logging behave exactly as for /v1/chat/completions.
func (x *exchange) servePromptCompletion(ref string) error {
	c := &x.call
	x.entry.Operation = providers.OpChat
	if err := jsonlimit.Object(c.Body); err != nil && len(c.Body) > 0 {
		return apierror.BadRequest("", "the request body must be a JSON object: %v", err)
	}
	p, v, err := prompts.Resolve(x.r.Context(), x.g.app.PromptRegistry(), x.identity.WorkspaceID, ref)
	if err != nil {
		return err
	}
	x.basePrompt = promptUse{id: p.ID, version: v.Number}
	x.usedPrompt = x.basePrompt
	body, err := prompts.RenderRequest(p, v, c.Body)
	if err != nil {
		return err
	}
	// A config target with prompt_id renders its own prompt from the
	// client's variables and overrides, not from this rendering.
	x.varsBody = c.Body
	c.Op, c.Method, c.Path, c.RawQuery = providers.OpChat, http.MethodPost, "/chat/completions", ""
	c.Body = body
	c.Model = gjson.GetBytes(body, "model").String()
	c.Stream = gjson.GetBytes(body, "stream").Bool()
	x.entry.Model, x.entry.Stream = c.Model, c.Stream

	hdr := promptHeaders(x.hdr, &v.Target)
	if hdr == x.hdr || v.Provider == "" {
		x.plan, err = routing.Resolve(hdr, x.g.app, x.g.configs)
	} else {
		var cfg routing.Config
		if err = json.Unmarshal(v.Target.ConfigObject(), &cfg); err != nil {
			return apierror.Newf(http.StatusInternalServerError, apierror.TypeServer, "prompt %q version %d: unusable provider settings", p.Slug, v.Number)
		}
		x.plan, err = routing.ResolveConfig(&cfg, hdr, x.g.app)
	}
	if err != nil {
		return err
	}
	if c.Stream {
		// Streamed exactly as /v1/chat/completions streams.
		return x.route(hdr)
	}
	rec := &promptRecorder{header: make(http.Header)}
	client := x.w
	x.w = rec
	err = x.route(hdr)
	x.w = client
	if err != nil {
		return err
	}
	x.writePromptResponse(rec)
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
func (x *exchange) takeVariables() {
	c := &x.call
	if c.Op != providers.OpChat || !hasPromptTarget(x.plan) {
		return
	}
	// The template gives the messages; SDKs that require messages send
	// some anyway, and they are not the prompt's.
	x.varsBody, _ = sjson.DeleteBytes(c.Body, "messages")
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

// renderTarget renders t's prompt_id with the client's variables. The
// stream flag follows the client's request whatever the version saved,
// because the client reads the answer in the form it asked for.
func (x *exchange) renderTarget(t *routing.Target) ([]byte, promptUse, error) {
	p, v, err := prompts.Resolve(x.r.Context(), x.g.app.PromptRegistry(), x.identity.WorkspaceID, t.PromptID)
	if err != nil {
		return nil, promptUse{}, targetErr(t, err)
	}
	use := promptUse{id: p.ID, version: v.Number}
	src := x.varsBody
	if src == nil {
		src = x.call.Body
	}
	body, err := prompts.RenderRequest(p, v, src)
	if err != nil {
		return nil, use, targetErr(t, err)
	}
	if x.call.Stream {
		body, err = sjson.SetBytes(body, "stream", true)
	} else {
		body, err = sjson.DeleteBytes(body, "stream")
	}
	return body, use, err
}

// targetErr names the target whose prompt failed, since a config may
// name several prompts.
func targetErr(t *routing.Target, err error) error {
	e := *apierror.As(err)
	e.Message = t.Path + ".prompt_id: " + e.Message
	return &e
}

// promptRecorder holds a non-streamed prompt completion's answer so it can
// be wrapped in the spec's envelope once it is complete.
type promptRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (p *promptRecorder) Header() http.Header { return p.header }

func (p *promptRecorder) WriteHeader(status int) {
	if p.status == 0 && status >= 200 {
		p.status = status
	}
}

func (p *promptRecorder) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return p.body.Write(b)
}

// writePromptResponse writes the held answer: a success as {"status",
// "headers", "body"}, anything else as it is.
func (x *exchange) writePromptResponse(rec *promptRecorder) {
	w := x.w
	if rec.status == 0 {
		return // nothing was answered: the client went away
	}
	body := rec.body.Bytes()
	if rec.status < 200 || rec.status >= 300 {
		copyHeader(w.Header(), rec.header)
		w.WriteHeader(rec.status)
		_, _ = w.Write(body)
		return
	}
	if jsonlimit.Object(body) != nil {
		// The provider's answer broke off after it began; being held, it
		// can still be reported as the failure it is.
		e := apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "the provider's response was incomplete")
		x.entry.Error, x.entry.Status = e.Message, e.Status
		x.setGatewayHeaders(w.Header())
		apierror.Write(w, e)
		return
	}
	headers := make(map[string]string, 8)
	for k, v := range rec.header {
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

	h := w.Header()
	for k, v := range rec.header {
		if name := strings.ToLower(k); name != "content-type" && safePromptHeader(name) {
			h[k] = v
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(rec.status)
	_, _ = w.Write(out)
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

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

// fillPromptTargets gives every leaf that names only a prompt_id the
// provider saved with that prompt's version (a virtual key, or a provider
// with where-to-reach settings), so one config can route between prompts
// kept on different providers. A leaf's own settings and the request's
// headers were applied first and still win.
func (x *exchange) fillPromptTargets(hdr *ingress.Headers) error {
	for _, t := range x.plan.Leaves {
		if t.PromptID == "" || t.Settings.Provider != "" {
			continue
		}
		_, v, err := prompts.Resolve(x.r.Context(), x.g.app.PromptRegistry(), x.identity.WorkspaceID, t.PromptID)
		if err != nil {
			return targetErr(t, err)
		}
		var saved providers.Settings
		switch {
		case v.Target.VirtualKey != "":
			vk, ok := x.g.app.VirtualKey(v.Target.VirtualKey)
			if !ok {
				return apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "%s.prompt_id: the prompt's virtual key %q is not configured", t.Path, v.Target.VirtualKey).WithCode("virtual_key_not_found")
			}
			saved = *vk
			// The virtual key's credential replaces the caller's token.
			if t.Settings.APIKey == hdr.Authorization {
				t.Settings.APIKey = ""
			}
			t.VirtualKey = v.Target.VirtualKey
		case v.Target.Provider != "":
			if err := json.Unmarshal(v.Target.ConfigObject(), &saved); err != nil {
				return apierror.BadRequest(t.Path+".prompt_id", "%s.prompt_id: the prompt's provider settings are invalid", t.Path)
			}
		default:
			return apierror.BadRequest(t.Path+".provider", "%s names no provider and its prompt saves none (or only a config id): set provider or virtual_key on the target, or send %s%s", t.Path, ingress.Prefix, ingress.Provider)
		}
		t.Settings.Inherit(&saved)
		if err := routing.CheckProvider(t); err != nil {
			return err
		}
	}
	return nil
}
