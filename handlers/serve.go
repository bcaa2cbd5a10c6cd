package handlers

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/realtime"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// StatusClientClosed is logged when the client went away mid-request.
const StatusClientClosed = 499

// flight is the record of one request in progress: what each step of the
// pipeline returned (the parsed request, a local answer, the router's
// result), its responder, and the log entry. Steps return values; finish
// alone fills the entry from them, once, at the end.
type flight struct {
	entry observe.Entry
	out   responder
	// hdr is the parsed gateway headers (nil when they did not parse).
	hdr *ingress.Headers
	q   *Request
	// localOp is the operation of a local answer, "" when routed.
	localOp providers.Operation
	// planned is set once q's plan is complete.
	planned bool
	// steps, res, status and done are the router's: its steps, the
	// final attempt's result, the status its outcome reported, and
	// whether the answer was committed.
	steps  []routing.Step
	res    *result
	status int
	done   bool
	// class is the error class of a routing failure no attempt made
	// (the input fits no target's context window).
	class providers.ErrorClass
	// err is the message of the gateway's error answer, if any, and
	// refusal the reason it refuses the request for (observe.RefusalOf).
	err     string
	refusal string
	// costUSD and costKnown are the answer's price, when priced.
	costUSD   float64
	costKnown bool
	// filled is set once finish filled the entry.
	filled bool
	// socket marks a realtime session: its responses are recorded in
	// the ledger one by one, the socket itself is not (realtime.go).
	socket bool
}

// ServeHTTP implements caddyhttp.MiddlewareHandler. The gateway is
// terminal: next is never called.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if realtimeUpgrade(r) {
		// A browser's key comes as a subprotocol (llm_ratelimit in
		// front took it already when it runs).
		realtime.TakeSubprotocolKey(r.Header)
	}
	f := g.serveFlight(w, r)
	if f.res != nil && f.res.abort {
		// A passed-through answer broke off: break the connection
		// rather than end it cleanly (net/http treats this panic as an
		// abort and logs nothing).
		panic(http.ErrAbortHandler)
	}
	return nil
}

// serveFlight runs r through the pipeline, top to bottom: parse, local
// answer or plan and run, finish. Every request is logged exactly once,
// at the end.
func (g *Gateway) serveFlight(w http.ResponseWriter, r *http.Request) *flight {
	f := g.startFlight(w, r)
	g.endFlight(r, f, g.serve(r, f))
	return f
}

// startFlight starts the record of r, answered through w.
func (g *Gateway) startFlight(w http.ResponseWriter, r *http.Request) *flight {
	f := &flight{}
	f.out.w = w
	// The clock starts here; everything else is filled by finish.
	f.entry.Start = time.Now()
	f.entry.Method = r.Method
	f.out.shape = errorShaperFor(r.URL.Path)
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Map(f.placeholder)
	}
	return f
}

// endFlight writes err as the answer when there is one and none was
// written yet, and logs the request.
func (g *Gateway) endFlight(r *http.Request, f *flight, err error) {
	if err != nil {
		e := apierror.As(err)
		f.err, f.refusal = e.Message, observe.RefusalOf(e)
		info := f.res.info()
		if info == nil && f.q != nil && f.q.Plan != nil {
			// Routing ended before any attempt (every breaker open, or
			// no target's window fits the input).
			info = &answerInfo{label: statusNoCache, errType: f.class}
		}
		f.out.error(e, info)
	}
	f.out.endStream(nil)
	f.finish()
	g.claimCharge(r, f)
	if !f.socket {
		g.app.UsageLedger().Record(&f.entry)
	}
	f.entry.Log(r, g.logger)
	observe.RunDone(r, &f.entry)
	if f.q != nil && f.q.body != nil {
		// Last: nothing of the request is read after this but by the
		// transports still holding a reader of the body. The body the
		// budget stage or llm_ratelimit recorded is forgotten first.
		ingress.ClearBody(r)
		f.q.body.Release()
	}
}

// serve is the pipeline: parse → local? → plan → run. A returned error
// is the client's answer; otherwise the answer was written.
func (g *Gateway) serve(r *http.Request, f *flight) error {
	q, err := g.parse(r, f)
	f.q = q
	if err != nil {
		return err
	}
	if responsesUpgrade(r) {
		// Before the local answers: GET /v1/responses is otherwise
		// the stored responses' list.
		return g.serveResponsesWS(r, q, f)
	}
	a, err := g.local(r, q)
	if err != nil {
		return err
	}
	if a != nil {
		f.localOp = a.op
		f.writeLocal(a)
		return nil
	}
	return g.route(r, q, f)
}

// route plans q and runs the plan: the provider's part of the pipeline.
func (g *Gateway) route(r *http.Request, q *Request, f *flight) error {
	if realtimeUpgrade(r) {
		return g.serveRealtime(r, q, f)
	}
	var err error
	if q.Call.Op == providers.OpResponses {
		// Bounds are checked here, before any provider call, for native
		// and translated targets alike.
		if q.adapter, err = g.responsesAdapter(r, q); err != nil {
			return err
		}
	}
	if q.Call.Op == providers.OpMessages || q.Call.Op == providers.OpCountTokens {
		if err := g.messagesRoute(q); err != nil {
			return err
		}
	}
	f.out.adapter, f.out.ctx, f.out.text.on = q.adapter, r.Context(), q.Call.Stream
	f.out.passthrough = q.Call.Op == providers.OpProxy
	if err := g.plan(r, q); err != nil {
		return err
	}
	f.planned = true
	if err := g.admitBudget(r, q, f); err != nil {
		return err
	}
	return g.run(r, q, f)
}

// run executes the plan and writes the final answer when no attempt has
// written it yet.
func (g *Gateway) run(r *http.Request, q *Request, f *flight) error {
	ex := &executor{g: g, q: q, r: r, out: &f.out, budget: g.app.HeldBudget()}
	// Held answers count against the budget until written below.
	defer ex.releaseHeld()
	gs, err := g.newGuardSession(q)
	if err != nil {
		return err
	}
	rr, err := g.router.Run(r.Context(), q.Plan, routeRequest(q), steps(q, ex, g.cache, gs))
	f.steps = rr.Steps
	f.res, f.status, f.done, f.class = resultOf(rr.Outcome), rr.Status, rr.Committed, rr.ErrorType
	f.estimateBrokenStream()
	f.price(g.app.Prices())
	if err != nil {
		return err
	}
	res := f.res
	if res != nil && res.hooks != nil {
		// Async hooks run once the answer below was sent.
		defer g.runAsync(r.Context(), res.hooks, f.out.traceID, q.body)
	}
	if res != nil && res.held != nil && !f.out.committed() {
		f.out.held(res.held, res.info(), q.Envelope)
	}
	f.out.endStream(nil)
	return nil
}

// setHeader records the parsed gateway headers and gives the responder
// the trace id (made up when the client sent none or the headers did not
// parse), which every answer carries.
func (f *flight) setHeader(hdr *ingress.Headers) {
	f.hdr = hdr
	if hdr == nil {
		f.out.traceID = newTraceID()
		return
	}
	if hdr.TraceID == "" {
		hdr.TraceID = newTraceID()
	}
	f.out.traceID, f.out.alias = hdr.TraceID, hdr.Alias
}

// finish fills the log entry, once, from what the steps returned: the
// request parse read, the local answer or the plan, the router's result,
// and what the responder sent.
func (f *flight) finish() {
	e := &f.entry
	f.filled = true
	e.TraceID = f.out.traceID
	if f.hdr != nil {
		e.Metadata = f.hdr.Metadata
	}
	q := f.q
	if q != nil {
		if id := q.Identity; id != nil {
			e.KeyName, e.Workspace, e.Organisation = id.Name, id.WorkspaceID, id.OrganisationID
		}
		e.Operation, e.Path = q.Call.Op, q.Call.Path
		e.Model, e.Stream = q.Call.Model, q.Call.Stream
		if f.planned {
			e.ConfigID = q.Plan.ConfigID
			e.VirtualKey = q.RouteHeader.VirtualKey
		}
	}
	if f.localOp != "" {
		e.Operation = f.localOp
	}
	e.Error, e.Refusal = f.err, f.refusal
	f.logSteps(f.steps)
	e.CostUSD, e.CostKnown = f.costUSD, f.costKnown
	res := f.res
	switch {
	case res != nil && f.done:
		e.Status = f.status
	case f.out.status != 0:
		e.Status = f.out.status
	}
	e.FirstByte = f.out.firstByte
	if q != nil && q.Plan != nil {
		e.CacheState = statusNoCache
	}
	e.ErrorType = string(f.class)
	prompt := promptUse{}
	if q != nil {
		prompt = q.Prompt
	}
	if res != nil {
		if res.target != nil {
			e.Provider = res.target.Settings.Provider
		}
		if res.model != "" {
			e.Model = res.model
		}
		if res.label != "" {
			e.CacheState = res.label
		}
		e.Usage = res.usage
		e.ErrorType = string(res.errType)
		f.logHooks(res.hooks)
		if f.err == "" {
			// The final attempt's answer is the client's: its refusal,
			// if it is one, is the request's.
			e.Error, e.Refusal = res.err, res.refusal
		}
		prompt = res.prompt
	}
	if prompt.id != "" {
		e.Extra = append(e.Extra, zap.String("prompt_id", prompt.id), zap.Int("prompt_version", prompt.version))
	}
}

// logSteps records the router's steps as the log entry's attempts.
func (f *flight) logSteps(steps []routing.Step) {
	if len(steps) == 0 {
		return
	}
	f.entry.Attempts = make([]observe.Attempt, len(steps))
	for i, s := range steps {
		f.entry.Attempts[i] = observe.Attempt{
			Target:   s.Target.Path,
			Provider: s.Target.Settings.Provider,
			Status:   s.Status,
			Duration: s.Duration,
			Outcome:  s.Outcome,
		}
	}
}

// usageFromBody reads usage from a complete JSON answer.
func usageFromBody(body []byte) *providers.Usage {
	u := gjson.Get(view(body), "usage")
	if !u.IsObject() {
		return nil
	}
	return usageFromJSON(u)
}

// newTraceID makes up a trace id: a UUIDv7, whose leading 48 bits are
// the time in milliseconds, so ids made up one after the other sort in
// time order. The usage ledger indexes trace ids; a random id (v4) sent
// every insert to a random page of that index, one page written back
// per record at every commit (19 µs of the writer's CPU per record at
// 10,000 records a second), where a time-ordered id appends.
func newTraceID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// The session header of loadbalance affinity, under both prefixes.
var sessionHeaders = [2]string{"X-Gateway-Session-Id", "X-Portkey-Session-Id"}

// sessionHeader returns the request's x-gateway-session-id (or its
// x-portkey- form), "" when it has none.
func sessionHeader(h http.Header) string {
	for _, k := range sessionHeaders {
		if v := h[k]; len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}
