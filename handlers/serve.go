package handlers

import (
	"cmp"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Response header names (without prefix) the gateway sets on every routed
// response.
const (
	RespTraceID       = "trace-id"
	RespProvider      = "provider"
	RespLastUsedIndex = "last-used-option-index"
	RespRetryCount    = "retry-attempt-count"
	RespCacheStatus   = "cache-status"
)

// exchange is the state of one client request as it passes the pipeline.
type exchange struct {
	g        *Gateway
	w        http.ResponseWriter
	r        *http.Request
	hdr      *ingress.Headers
	identity *app.Identity
	call     providers.Call
	plan     *routing.Plan
	entry    observe.Entry

	// last is the buffered failure of the latest attempt, written to the
	// client if no later attempt succeeds.
	last *bufferedResponse
	// lastTarget and retries describe the attempt that answered.
	lastTarget *routing.Target
	retries    int
	// cacheState is the cache status of the answering target; leafCache
	// that of the target the router is on, which becomes cacheState once
	// that target is attempted.
	cacheState string
	leafCache  string
	// storeKey is the cache key of storeTarget's answer, set on a miss
	// (or a forced refresh) so a success is stored.
	storeKey    string
	storeTarget *routing.Target
	// body is the request body for bodyTarget: its prompt rendered and
	// its override_params merged (or bodyErr, when rendering failed), and
	// bodyPrompt the prompt it was rendered from.
	bodyTarget *routing.Target
	body       []byte
	bodyErr    error
	bodyPrompt promptUse

	// varsBody is the client's body carrying the prompt variables, set
	// when some target renders a prompt; basePrompt is the prompt a
	// /v1/prompts/{id}/completions call named; usedPrompt is the one
	// whose rendering the latest target sent, for the log.
	varsBody   []byte
	basePrompt promptUse
	usedPrompt promptUse

	// abort is set when a passed-through answer broke off: the client's
	// connection is then aborted rather than ended cleanly.
	abort bool
}

// bufferedResponse is a held upstream answer (usually an error).
type bufferedResponse struct {
	status int
	header http.Header
	body   []byte
}

// ServeHTTP implements caddyhttp.MiddlewareHandler. The gateway is
// terminal: next is never called.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	x := &exchange{g: g, w: w, r: r}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Map(x.placeholder)
	}
	x.entry.Start = time.Now()
	x.entry.Method = r.Method
	err := x.serve()
	if err != nil {
		e := apierror.As(err)
		x.entry.Error = e.Message
		x.setGatewayHeaders(w.Header())
		apierror.Write(w, e)
		x.entry.Status = e.Status
	}
	if p := x.usedPrompt; p.id != "" {
		x.entry.Extra = append(x.entry.Extra, zap.String("prompt_id", p.id), zap.Int("prompt_version", p.version))
	}
	x.entry.Log(r, g.logger)
	observe.RunDone(r, &x.entry)
	if x.abort {
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (x *exchange) serve() error {
	r := x.r
	hdr, err := ingress.Parse(r.Header)
	x.hdr = hdr
	if err != nil {
		x.entry.TraceID = uuid.NewString()
		return err
	}
	if hdr.TraceID == "" {
		hdr.TraceID = uuid.NewString()
	}
	x.entry.TraceID = hdr.TraceID
	x.entry.Metadata = hdr.Metadata

	id, ok := x.g.app.Authenticate(hdr.APIKey)
	if !ok {
		msg := "missing gateway API key: send it in the " + ingress.Prefix + ingress.APIKey + " header"
		if hdr.APIKey != "" {
			msg = "invalid gateway API key"
		}
		return apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, msg).WithCode("invalid_api_key")
	}
	x.identity = id
	x.entry.KeyName, x.entry.Workspace, x.entry.Organisation = id.Name, id.WorkspaceID, id.OrganisationID

	path, ok := strings.CutPrefix(r.URL.Path, "/v1")
	if !ok || (path != "" && path[0] != '/') {
		return apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown path %s: the gateway serves /v1/*", r.URL.Path)
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
	default:
		return apierror.Newf(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest, "method %s is not supported", r.Method)
	}
	c := &x.call
	c.Op = providers.OperationFor(r.Method, path)
	c.Method, c.Path, c.RawQuery, c.Header = r.Method, path, r.URL.RawQuery, r.Header
	x.entry.Operation, x.entry.Path = c.Op, path

	if c.Body, err = x.readBody(); err != nil {
		return err
	}
	// Prompt completions lie under the prompt API's prefix but are
	// inference: they take the whole pipeline, not the control plane.
	if ref, ok := prompts.CompletionsRef(r.URL.Path); ok && r.Method == http.MethodPost {
		return x.servePromptCompletion(ref)
	}
	if controlplane.Owns(r.URL.Path) {
		x.entry.Operation = "control"
		rec := caddyhttp.NewResponseRecorder(x.w, nil, nil)
		x.setGatewayHeaders(x.w.Header())
		controlplane.Serve(rec, r, &controlplane.Caller{Identity: id, App: x.g.app, Body: c.Body})
		x.entry.Status = rec.Status()
		return nil
	}
	if err := x.inspectBody(); err != nil {
		return err
	}
	if x.plan, err = routing.Resolve(hdr, x.g.app, x.g.configs); err != nil {
		return err
	}
	x.takeVariables()
	return x.route(hdr)
}

// route runs the plan: the routing strategy and its attempts. hdr are the
// headers the plan was built from, which for a prompt completion may
// carry the prompt's saved virtual key rather than the client's.
func (x *exchange) route(hdr *ingress.Headers) error {
	if err := x.fillPromptTargets(hdr); err != nil {
		return err
	}
	r, c := x.r, &x.call
	x.entry.ConfigID = x.plan.ConfigID
	if hdr.VirtualKey != "" {
		x.entry.VirtualKey = hdr.VirtualKey
	}

	rq := &routing.Request{Metadata: hdr.Metadata, MetadataRaw: hdr.MetadataRaw, Params: c.Body, Path: r.URL.Path}
	res, err := x.g.router.Run(r.Context(), x.plan, rq, x)
	x.logSteps(res.Steps)
	if x.cacheState == "" {
		// No target was attempted: report what the last one looked at,
		// or DISABLED when none consulted the cache.
		x.cacheState = cmp.Or(x.leafCache, cache.StatusDisabled)
	}
	x.entry.CacheState = x.cacheState
	if err != nil {
		return err
	}
	x.entry.Status = res.Status
	if !res.Committed {
		x.writeLast()
	}
	return nil
}

// logSteps records the router's steps as the log entry's attempts.
func (x *exchange) logSteps(steps []routing.Step) {
	if len(steps) == 0 {
		return
	}
	x.entry.Attempts = make([]observe.Attempt, len(steps))
	for i, s := range steps {
		x.entry.Attempts[i] = observe.Attempt{
			Target:   s.Target.Path,
			Provider: s.Target.Settings.Provider,
			Status:   s.Status,
			Duration: s.Duration,
			Outcome:  s.Outcome,
		}
	}
}

// readBody reads the whole body, bounded by the configured limit, because
// retries and fallbacks must be able to send it again.
func (x *exchange) readBody() ([]byte, error) {
	r := x.r
	limit := x.g.MaxRequestBody
	if body, ok := ingress.Body(r); ok {
		if int64(len(body)) > limit {
			return nil, tooLarge(limit)
		}
		return body, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(x.w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, apierror.New(http.StatusBadRequest, apierror.TypeInvalidRequest, "could not read the request body")
	}
	return body, nil
}

func tooLarge(limit int64) error {
	return apierror.Newf(http.StatusRequestEntityTooLarge, apierror.TypeInvalidRequest,
		"request body exceeds the gateway's limit of %d bytes", limit).WithCode("request_too_large")
}

// inspectBody reads model and stream from JSON bodies and rejects malformed
// JSON for the operations that need it.
func (x *exchange) inspectBody() error {
	c := &x.call
	switch c.Op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings, providers.OpResponses, providers.OpImages, providers.OpSpeech:
	default:
		return nil
	}
	if ct := x.r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") {
		return nil // image edits are multipart
	}
	// Bounded and UTF-8-checked before gjson or any provider walks it: a
	// few megabytes of "[" would otherwise exhaust a recursive validator's
	// stack.
	if len(c.Body) == 0 {
		return apierror.BadRequest("", "the request body must be a JSON object")
	}
	switch err := jsonlimit.Object(c.Body); err {
	case nil:
	case jsonlimit.ErrTooDeep, jsonlimit.ErrInvalidUTF8:
		return apierror.BadRequest("", "the request body is not acceptable: %v", err)
	default:
		return apierror.BadRequest("", "the request body must be a JSON object")
	}
	c.Model = gjson.GetBytes(c.Body, "model").String()
	c.Stream = gjson.GetBytes(c.Body, "stream").Bool()
	x.entry.Model, x.entry.Stream = c.Model, c.Stream
	if c.Op == providers.OpCompletions {
		return validateCompletion(c.Body)
	}
	return nil
}

// setGatewayHeaders adds the gateway's response headers, under the alias
// prefix too when the client used it.
func (x *exchange) setGatewayHeaders(h http.Header) {
	set := func(name, v string) {
		if v == "" {
			return
		}
		h.Set(ingress.Prefix+name, v)
		if x.hdr != nil && x.hdr.Alias {
			h.Set(ingress.AliasPrefix+name, v)
		}
	}
	set(RespTraceID, x.entry.TraceID)
	if x.lastTarget != nil {
		set(RespProvider, x.lastTarget.Settings.Provider)
		set(RespLastUsedIndex, x.lastTarget.Path)
		set(RespRetryCount, strconv.Itoa(x.retries))
	}
	if x.cacheState != "" {
		set(RespCacheStatus, x.cacheState)
	}
}

// writeLast writes the final buffered answer when no attempt committed.
func (x *exchange) writeLast() {
	b := x.last
	if b == nil {
		return
	}
	h := x.w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(len(b.body)))
	x.setGatewayHeaders(h)
	x.w.WriteHeader(b.status)
	_, _ = x.w.Write(b.body)
	x.entry.Status = b.status
}

// usageFromBody reads usage from a complete JSON answer.
func usageFromBody(body []byte) *providers.Usage {
	u := gjson.GetBytes(body, "usage")
	if !u.IsObject() {
		return nil
	}
	return usageFromJSON(u)
}
