package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/bodybuf"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Hooks and guardrails (research/portkey.md §7) run per leaf target, as
// the reference gateway runs them: a guardStep wraps the executor (and
// the cache step) of a request whose plan has hooks, so
//
//	Cached(t):  before-hooks(t) ─ deny? → miss (Attempt answers 446)
//	                            ─ else cache lookup ─ hit → after-hooks on the stored answer
//	Attempt(t): [before-hooks(t) again on a retry] ─ deny? → 446, provider not called
//	            ─ attempt (transformed body sent) ─ after-hooks on the held answer
//
// A 446 is then an attempt outcome like a provider status: retry and
// strategy on_status_codes and fallback see it. Non-stream answers of a
// hooked target are held so after-hooks can judge, change or withhold
// them; a stream is judged by a streamGuard (guardrails_stream.go). A
// request whose plan has no hooks never builds a guardSession: the only
// cost is a scan of the plan's leaves.

// provisionGuardrails makes the handler's hook runner: checks that call
// out (webhook, log, validUrls) go through the egress guard, and saved
// guardrails resolve through the llm app.
func (g *Gateway) provisionGuardrails() {
	g.hooks = &guardrails.Runner{
		Env:   guardrails.Env{Client: guardrails.NewEgressClient(g.guard)},
		Saved: g.app.Guardrail,
	}
}

// guardedOp reports whether hooks apply to an operation; the reference
// gateway skips them for every other call.
func guardedOp(op providers.Operation) bool {
	switch op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings, providers.OpResponses, providers.OpMessages:
		return true
	}
	return false
}

func hooked(t *routing.Target) bool {
	return len(t.BeforeRequestHooks) > 0 || len(t.AfterRequestHooks) > 0
}

// guardSession is the hook state of one request; nil when no target of
// its plan has hooks. Attempts are sequential, so cur needs no lock.
type guardSession struct {
	rn *guardrails.Runner
	q  *Request
	// holdStream lists the targets whose after-hooks can deny: their
	// streams are held until the verdict.
	holdStream map[*routing.Target]bool
	cur        guardAttempt
}

// guardAttempt is the hook state of the target being attempted.
type guardAttempt struct {
	t      *routing.Target
	req    guardrails.Request
	before *guardrails.Result
	after  *guardrails.Result
	err    error
}

// hookRecord is what an attempt's hooks produced, carried in its result
// to the answer, the log and the async hooks.
type hookRecord struct {
	before *guardrails.Result
	after  *guardrails.Result
	// raw is the hook_results JSON, marshalled once for the answer and
	// the log (marshalling the results is the costliest part of a cheap
	// hook).
	raw []byte
}

// json returns the hook_results object of h (guardrails.HookResults),
// marshalled once. Each result is marshalled by its own MarshalJSON and
// the object put together here: encoding/json would validate and compact
// every result's bytes once more.
func (h *hookRecord) json() []byte {
	if h.raw != nil {
		return h.raw
	}
	b := make([]byte, 0, 1024)
	b = append(b, `{"before_request_hooks":`...)
	b = appendResults(b, h.before)
	b = append(b, `,"after_request_hooks":`...)
	b = appendResults(b, h.after)
	h.raw = append(b, '}')
	return h.raw
}

func appendResults(b []byte, r *guardrails.Result) []byte {
	b = append(b, '[')
	if r != nil {
		for i, hr := range r.Hooks {
			if i > 0 {
				b = append(b, ',')
			}
			raw, err := hr.MarshalJSON()
			if err != nil {
				raw = []byte(`{"id":` + strconv.Quote(hr.ID) + `,"type":` + strconv.Quote(hr.Type) + `,"error":"unencodable result"}`)
			}
			b = append(b, raw...)
		}
	}
	return append(b, ']')
}

// newGuardSession compiles the hooks of every leaf of q's plan (a cache
// hit after the first request) and returns nil when there are none. An
// unusable hook (unknown check or saved guardrail id, a pattern RE2
// cannot compile) is a 400 before anything is attempted.
func (g *Gateway) newGuardSession(q *Request) (*guardSession, error) {
	if !guardedOp(q.Call.Op) {
		return nil, nil
	}
	var gs *guardSession
	for _, t := range q.Plan.Leaves {
		if !hooked(t) {
			continue
		}
		if gs == nil {
			gs = &guardSession{rn: g.hooks, q: q}
		}
		if _, err := g.hooks.CanDeny(guardrails.BeforeRequest, t.BeforeRequestHooks); err != nil {
			return nil, err
		}
		deny, err := g.hooks.CanDeny(guardrails.AfterRequest, t.AfterRequestHooks)
		if err != nil {
			return nil, err
		}
		if deny {
			if gs.holdStream == nil {
				gs.holdStream = make(map[*routing.Target]bool, 1)
			}
			gs.holdStream[t] = true
		}
	}
	return gs, nil
}

// runBefore runs the before-hooks of p's target on the body p would
// send, making it the session's current target.
func (gs *guardSession) runBefore(ctx context.Context, p *attemptPlan) {
	t := p.target
	gs.cur = guardAttempt{t: t}
	if p.err != nil {
		return // the attempt reports it
	}
	// Type is the client's call; Format the shape of what the target is
	// sent and answers, which for a translated target (a format
	// adapter's chat completion, p.op) is not the client's: every check
	// of every road, JSON, stream or cached, reads the bodies by it.
	gs.cur.req = guardrails.Request{
		Body:     p.body,
		Type:     guardrails.RequestType(string(gs.q.Call.Op), p.stream),
		Format:   guardrails.RequestType(string(p.op), false),
		Provider: t.Settings.Provider,
		Model:    p.model,
		Metadata: gs.q.Header.Metadata,
		Stream:   p.stream,
	}
	gs.cur.before, gs.cur.err = gs.rn.Before(ctx, t.BeforeRequestHooks, &gs.cur.req)
	recordVerdicts("input", gs.cur.before)
}

// recordVerdicts counts each check's verdict in the guardrail metric. The
// label is the check's id, which names a registered check module (an
// unknown one fails the config), so its values are bounded.
func recordVerdicts(stage string, r *guardrails.Result) {
	if r == nil {
		return
	}
	for _, h := range r.Hooks {
		for _, c := range h.Checks {
			verdict := "fail"
			switch {
			case c.Error != nil:
				verdict = "error"
			case c.Verdict:
				verdict = "pass"
			}
			observe.RecordGuardrailVerdict(stage, c.ID, verdict)
		}
	}
}

// apply completes p with what the current target's before-hooks made:
// the body a mutator changed, and the session that judges its stream.
func (gs *guardSession) apply(p *attemptPlan) {
	if b := gs.cur.before; b != nil && b.Transformed {
		p.body = b.Body
	}
	p.guard = gs
}

func (gs *guardSession) record() *hookRecord {
	return &hookRecord{before: gs.cur.before, after: gs.cur.after}
}

// guardStep runs the hooks around the next steps for targets that have
// them; targets without hooks pass straight through.
type guardStep struct {
	next step
	gs   *guardSession
}

// cached implements step: before-hooks decide first; a stored answer
// (to the body they made) then passes the after-hooks like a fresh one.
func (s *guardStep) cached(ctx context.Context, p attemptPlan) (routing.Outcome, bool) {
	if !hooked(p.target) {
		return s.next.cached(ctx, p)
	}
	s.gs.runBefore(ctx, &p)
	if s.gs.cur.err != nil || s.gs.cur.before.Denied() {
		return routing.Outcome{}, false
	}
	s.gs.apply(&p)
	o, ok := s.next.cached(ctx, p)
	if !ok {
		return o, false
	}
	return s.after(ctx, o), true
}

// attempt implements step: a denied request is answered 446 without
// calling the provider; otherwise the attempt sends what the hooks
// made, and its answer passes the after-hooks.
func (s *guardStep) attempt(ctx context.Context, p attemptPlan) routing.Outcome {
	t := p.target
	if !hooked(t) {
		return s.next.attempt(ctx, p)
	}
	gs := s.gs
	if p.try > 0 || gs.cur.t != t {
		// A retry is judged again; the first try was judged by cached.
		gs.runBefore(ctx, &p)
	}
	cur := &gs.cur
	if cur.err != nil || cur.before.Denied() {
		res := &result{answerInfo: answerInfo{target: t, try: p.try, label: statusNoCache}, model: cur.req.Model}
		if cur.err != nil {
			// An unusable hook fails the attempt; it is not retried.
			return res.fail(apierror.As(cur.err), routing.CauseLocal)
		}
		res.hooks = gs.record()
		res.held = denyAnswer(cur.before, nil)
		res.err, res.refusal = "denied by a before-request hook", observe.RefusalGuardrailDenied
		return routing.Outcome{Status: guardrails.StatusDenied, Result: res}
	}
	gs.apply(&p)
	return s.after(ctx, s.next.attempt(ctx, p))
}

// after runs the after-hooks on an attempt's held answer (a stream that
// reached the client was judged by its streamGuard) and records the
// results in it.
func (s *guardStep) after(ctx context.Context, o routing.Outcome) routing.Outcome {
	res := resultOf(o)
	if res == nil {
		return o
	}
	cur := &s.gs.cur
	rec := s.gs.record()
	res.hooks = rec
	h := res.held
	if o.Committed || h == nil || res.err != "" {
		// Streamed (judged on the way), or the gateway's own failure.
		return o
	}
	hooks := cur.t.AfterRequestHooks
	var text string
	ans := &guardrails.Answer{Body: h.body, Status: h.status}
	if h.stream {
		text = streamText(h.body)
		ans = &guardrails.Answer{Text: text, Status: h.status}
	}
	after, err := s.gs.rn.After(ctx, hooks, &cur.req, ans)
	if err != nil {
		return res.fail(apierror.As(err), routing.CauseLocal)
	}
	recordVerdicts("output", after)
	cur.after, rec.after = after, after
	if after.Denied() {
		res.held = denyAnswer(cur.before, after)
		res.err, res.refusal = "answer withheld by an after-request hook", observe.RefusalGuardrailDenied
		o.Status = guardrails.StatusDenied
		return o
	}
	body := h.body
	if after != nil && after.Transformed && !h.stream {
		body = after.Body
	}
	status := guardrails.Status(cur.before, after, h.status)
	var results []byte
	if guardrails.HasResults(cur.before, after) {
		if h.stream && s.gs.q.Call.Op == providers.OpMessages {
			// Anthropic's stream has no event for them: an extra one
			// would break its clients. They are in the log.
		} else if h.stream {
			body = withHookEvent(body, rec.json())
		} else {
			results = rec.json()
			body = attachResults(body, results)
		}
	}
	res.held = &heldAnswer{status: status, header: h.header, body: body, stream: h.stream, results: results}
	o.Status = status
	return o
}

// attachResults returns the JSON object answer body with "hook_results"
// set to results. The common case (no such key yet) appends the member
// before the closing brace, without parsing the answer again; bodies
// that are not JSON objects are returned as they are.
func attachResults(body, results []byte) []byte {
	b := bytes.TrimRight(body, " \t\r\n")
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return body
	}
	if bytes.Contains(b, []byte(`"hook_results"`)) {
		if out, err := sjson.SetRawBytes(body, "hook_results", results); err == nil {
			return out
		}
		return body
	}
	inner := bytes.TrimSpace(b[1 : len(b)-1])
	out := make([]byte, 0, len(b)+len(results)+17)
	out = append(out, b[:len(b)-1]...)
	if len(inner) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"hook_results":`...)
	out = append(out, results...)
	return append(out, '}')
}

// denyAnswer is the 446 answer: the error envelope with hook_results.
func denyAnswer(before, after *guardrails.Result) *heldAnswer {
	return &heldAnswer{
		status: guardrails.StatusDenied,
		header: http.Header{"Content-Type": {"application/json"}},
		body:   guardrails.DenyBody(before, after),
	}
}

// logHooks adds the hook results (feedback included) to the log entry.
func (f *flight) logHooks(h *hookRecord) {
	if h == nil || !guardrails.HasResults(h.before, h.after) {
		return
	}
	f.entry.Extra = append(f.entry.Extra, zap.Any("hook_results", json.RawMessage(h.json())))
}

// runAsync hands the async hooks of the answer's attempt, once the
// answer was sent, to the llm app's bounded pool; their results are
// logged under the request's trace id. A run that does not fit in the
// pool is dropped, counted and (rate-limited) logged by the pool.
func (g *Gateway) runAsync(_ context.Context, h *hookRecord, traceID string, body *bodybuf.Buf) {
	if h == nil {
		return
	}
	pool := g.app.AsyncHooks()
	for i, r := range []*guardrails.Result{h.before, h.after} {
		if !r.HasAsync() {
			continue
		}
		// The hooks read the request body after the flight ends: its
		// lent buffer is left to the garbage collector.
		body.Keep()
		field := "before_request_hooks"
		if i == 1 {
			field = "after_request_hooks"
		}
		pool.Submit(r.AsyncSize(), func(ctx context.Context) {
			r.RunAsync(ctx, func(hr []guardrails.HookResult) {
				g.logger.Info("llm async hooks", zap.String("trace_id", traceID), zap.Any(field, hr))
			})
		})
	}
}
