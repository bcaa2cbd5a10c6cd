package handlers

import (
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/bodybuf"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/byteview"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Request is one client request as the pipeline sees it. parse and plan
// build it; after that nothing changes it, so the executor, the steps
// around it and the responder may all read it without coordination.
type Request struct {
	// Header holds the gateway headers, parsed.
	Header *ingress.Headers
	// RouteHeader holds the headers the plan was built from: Header, or
	// for a prompt completion a copy naming the prompt's saved virtual
	// key or config.
	RouteHeader *ingress.Headers
	// Identity is the authenticated gateway key.
	Identity *identity.Caller
	// charge bills calls made on the request's behalf (the semantic
	// cache's embeddings) to the usage limits it was admitted on; nil
	// when none applied (admitBudget).
	charge *budgets.Charge
	// Call is the call to make: the client's, or for a prompt completion
	// the chat completion its prompt renders to.
	Call providers.Call
	// body is the lent buffer holding the client's body, if any
	// (readBody): readers of it handed to a transport hold it
	// (outboundRequest), and the flight gives it back when it ends.
	body *bodybuf.Buf
	// URLPath is the request's URL path, "/v1/…".
	URLPath string
	// ClientHeader is the client's HTTP header, for what is forwarded.
	ClientHeader http.Header
	// Plan is the routing plan, complete (prompt targets included);
	// routePlan is its one writer.
	Plan *routing.Plan
	// planErr is why Plan could not be resolved; promptConfig is the
	// prompt version's provider settings it is resolved from, if any.
	planErr      error
	promptConfig *routing.Config
	// Prompt is the prompt a /v1/prompts/{id}/completions call rendered.
	Prompt promptUse
	// Envelope is set for a non-streamed prompt completion: a success is
	// wrapped in {status, headers, body}.
	Envelope bool

	// varsBody is the client's body carrying prompt variables, set when
	// some target renders its own prompt.
	varsBody []byte
	// attempts holds the attempt plan of each leaf target of Plan, in
	// order (attemptplan.go); one is its storage for a single target.
	attempts []attemptPlan
	one      [1]attemptPlan
	// exec is the executor of the attempts (steps.go).
	exec planned
	// adapter serves the request in another API's format per target
	// (see FormatAdapter); nil for a plain request.
	adapter FormatAdapter
}

// promptUse names a prompt version whose rendering was sent, for the log.
type promptUse struct {
	id      string
	version int
}

// parse reads everything the pipeline needs from r: the gateway headers,
// the caller's identity, the call and its body. It writes nothing to the
// client: what the gateway answers itself is decided next (local.go).
// With an error, the Request returned (nil when the headers did not
// parse) holds what was read, for the log entry.
func (g *Gateway) parse(r *http.Request, f *flight) (*Request, error) {
	hdr, err := ingress.Parse(r.Header)
	f.setHeader(hdr)
	if err != nil {
		return nil, err
	}
	q := &Request{Header: hdr, RouteHeader: hdr}
	id, err := g.identify(r, hdr)
	if err != nil {
		return q, err
	}
	q.Identity = id

	path, ok := strings.CutPrefix(r.URL.Path, "/v1")
	if !ok || (path != "" && path[0] != '/') {
		return q, apierror.Newf(http.StatusNotFound, apierror.TypeNotFound, "unknown path %s: the gateway serves /v1/*", r.URL.Path)
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
	default:
		return q, apierror.Newf(http.StatusMethodNotAllowed, apierror.TypeInvalidRequest, "method %s is not supported", r.Method)
	}
	q.URLPath, q.ClientHeader = r.URL.Path, r.Header
	c := &q.Call
	c.Op = providers.OperationFor(r.Method, path)
	c.Method, c.Path, c.RawQuery, c.Header = r.Method, path, r.URL.RawQuery, r.Header

	if c.Body, q.body, err = g.readBody(r, &f.out, pooledOp(c.Op)); err != nil {
		return q, err
	}
	// Prompt completions lie under the prompt API's prefix but are
	// inference: they take the whole pipeline, not the control plane.
	if ref, ok := prompts.CompletionsRef(r.URL.Path); ok && r.Method == http.MethodPost {
		if err := g.promptCompletion(r, q, ref); err != nil {
			return q, err
		}
		return q, checkModel(id, c)
	}
	if err := g.inspectBody(r, c); err != nil {
		return q, err
	}
	return q, checkModel(id, c)
}

// readBody reads the whole body, bounded by the configured limit, because
// retries and fallbacks must be able to send it again.
// With pool set, a large body of declared size is read into a buffer
// lent by package bodybuf (returned too, nil otherwise), which the flight
// gives back when it ends (endFlight).
func (g *Gateway) readBody(r *http.Request, out *responder, pool bool) ([]byte, *bodybuf.Buf, error) {
	limit := g.MaxRequestBody
	if g.controlBody(r) {
		limit = min(limit, controlplane.MaxBody)
	}
	if body, ok := ingress.Body(r); ok && pool {
		if int64(len(body)) > limit {
			return nil, nil, controlplane.TooLarge(limit)
		}
		// llm_ratelimit read it, into a lent buffer when large: taken
		// over here, since this operation may lend its body.
		buf := ingress.TakeBodyBuf(r)
		if !buf.Owns(body) {
			buf = nil
		}
		return body, buf, nil
	}
	if !pool || r.ContentLength <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength > limit {
		// Every body not lent a buffer: the one reader (a body
		// llm_ratelimit read included, left to the garbage collector).
		body, err := controlplane.ReadBody(out.w, r, limit)
		return body, nil, err
	}
	// A declared size (already bounded): one lent buffer, no limiting
	// reader; net/http ends the body at Content-Length.
	buf := bodybuf.Get(r.ContentLength)
	body := buf.Bytes()
	if buf == nil {
		body = make([]byte, r.ContentLength)
	}
	if _, err := io.ReadFull(r.Body, body); err != nil {
		buf.Release()
		return nil, nil, controlplane.ReadError(err)
	}
	return body, buf, nil
}

// controlBody reports whether r's body is a control-plane API's (keys,
// configs, prompts, policies, usage limits, ledger queries): bounded by
// controlplane.MaxBody, not max_request_body, since those APIs keep
// what they read and none needs more. A prompt completion lies under
// the prompts API's prefix but is inference, bounded as chat is; file
// uploads and batches are the jobs API's, not the control plane's.
func (g *Gateway) controlBody(r *http.Request) bool {
	return g.management.Owns(r.Method, r.URL.Path)
}

// pooledOp reports whether the body of an op may be read into a lent
// buffer: the inference calls whose bodies go to a provider and are never
// stored. The Responses API stores its input, files and batches store
// uploads, and the control plane keeps what it is sent, so those bodies
// are allocated as before.
func pooledOp(op providers.Operation) bool {
	switch op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings, providers.OpMessages:
		return true
	}
	return false
}

// inspectBody reads model and stream from JSON bodies and rejects bodies
// the inference operations cannot take: not a JSON object, not UTF-8, or
// nested deeper than jsonlimit.MaxDepth. The depth is checked without
// recursion before gjson or any provider walks the body, since a few
// megabytes of "[" would otherwise exhaust a recursive validator's stack.
func (g *Gateway) inspectBody(r *http.Request, c *providers.Call) error {
	switch c.Op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings, providers.OpResponses, providers.OpImages, providers.OpSpeech:
	case providers.OpMessages:
		return nil // handlers/messages.go checks its body
	default:
		if g.controlBody(r) {
			return nil // the control plane reads its bodies strictly
		}
		if err := checkPassthroughJSON(r, c.Body); err != nil {
			return err
		}
		return clientSecretModel(c)
	}
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") {
		return nil // image edits are multipart
	}
	if err := checkJSONObject(c.Body); err != nil {
		return err
	}
	c.Model, c.Stream = readModelStream(c.Body)
	if c.Op == providers.OpCompletions {
		return validateCompletion(c.Body)
	}
	return nil
}

// plan completes q: the routing plan (saved configs, virtual keys and
// prompt targets resolved) and each leaf target's attempt plan. After
// plan, q does not change.
func (g *Gateway) plan(r *http.Request, q *Request) error {
	if _, err := g.routePlan(q); err != nil {
		return err
	}
	if err := q.Plan.ResolvePrompts(r.Context(), g.app, q.Identity.WorkspaceID, q.RouteHeader); err != nil {
		return err
	}
	takeVariables(q)
	return g.planAttempts(r.Context(), q, g.cache, q.Envelope)
}

// routePlan returns q's routing plan, resolved on first use and kept:
// from a prompt version's saved provider settings (promptConfig) or from
// the routing headers, through the caller's records resolver, so the
// virtual keys and configs of the caller's workspace are found and no
// other workspace's. Steps that need the plan before planning (the jobs
// API's provider, whether a Messages target counts tokens) ask here
// too, so q.Plan has this one writer.
func (g *Gateway) routePlan(q *Request) (*routing.Plan, error) {
	if q.Plan == nil && q.planErr == nil {
		res := g.app.For(q.Identity)
		if q.promptConfig != nil {
			q.Plan, q.planErr = routing.ResolveConfig(q.promptConfig, q.RouteHeader, res)
		} else if h := g.aliasHeader(q); h != nil {
			q.Plan, q.planErr = routing.Resolve(h, res, g.configs)
		} else {
			q.Plan, q.planErr = routing.Resolve(q.RouteHeader, res, g.configs)
		}
	}
	return q.Plan, q.planErr
}

// checkJSONObject is the check every inference body passes: a JSON
// object, valid UTF-8, nested at most jsonlimit.MaxDepth levels, each
// member named once (jsonlimit's strict reading).
func checkJSONObject(b []byte) error {
	if len(b) == 0 {
		return apierror.BadRequest("", "the request body must be a JSON object")
	}
	if err := jsonlimit.Object(b); err != nil {
		return bodyJSONError(err, "the request body must be a JSON object")
	}
	return nil
}

// bodyJSONError is the 400 for a body jsonlimit refused: a repeated
// member names it as the parameter; other faults say what they are, or
// fall back to invalid.
func bodyJSONError(err error, invalid string) error {
	if d, ok := jsonlimit.AsDuplicate(err); ok {
		return apierror.BadRequest(d.Path, "the request body is not acceptable: %v", d)
	}
	switch err {
	case jsonlimit.ErrTooDeep, jsonlimit.ErrInvalidUTF8, jsonlimit.ErrSurrogateName:
		return apierror.BadRequest("", "the request body is not acceptable: %v", err)
	}
	return apierror.BadRequest("", "%s", invalid)
}

// checkPassthroughJSON applies the strict reading to a body passed
// through to a provider (any other /v1 path) when it is JSON: declared
// so, or opening as a JSON document does. A provider that reads it as
// JSON must read what the gateway read, so a repeated member is refused
// whatever the content type; a body that is not JSON at all is refused
// only when its type says it is.
func checkPassthroughJSON(r *http.Request, b []byte) error {
	ct := r.Header.Get("Content-Type")
	if len(b) == 0 || strings.HasPrefix(ct, "multipart/") {
		return nil
	}
	declared := jsonType(ct)
	if !declared && !opensJSON(b) {
		return nil
	}
	err := jsonlimit.Check(b)
	if err == nil {
		return nil
	}
	if _, dup := jsonlimit.AsDuplicate(err); dup || declared || err == jsonlimit.ErrSurrogateName {
		return bodyJSONError(err, "the request body is not valid JSON")
	}
	return nil
}

// jsonType reports whether a Content-Type names JSON (application/json,
// or a +json type).
func jsonType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// opensJSON reports whether b's first non-space byte opens an object or
// an array.
func opensJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return false
}

// readModelStream reads the model and stream fields of a checked body.
//
// One walk of the top-level members that skips string values with a
// vector search (jsonlimit.Members), not gjson's byte-by-byte walk: a
// body without "stream" (every non-streamed call) would otherwise be
// read to its end a second time after the check. The two values are
// then read as gjson reads them, so "1" or "true" as a string count as
// gjson counts them.
func readModelStream(b []byte) (string, bool) {
	var raw [2][]byte
	jsonlimit.Members(b, modelStream[:], raw[:])
	var model string
	if raw[0] != nil {
		// A string is decoded as a provider's decoder reads it
		// (jsonlimit.String), so the model judged is the model served;
		// anything else as gjson reads it. Either is a copy: the log and
		// the plan keep it, and b's memory is not theirs.
		var ok bool
		if model, ok = jsonlimit.String(raw[0]); !ok {
			model = strings.Clone(gjson.Parse(byteview.String(raw[0])).String())
		}
	}
	stream := raw[1] != nil && gjson.Parse(byteview.String(raw[1])).Bool()
	return model, stream
}

// modelStream are the members readModelStream reads.
var modelStream = [...]string{"model", "stream"}
