package handlers

import (
	"bytes"
	"context"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sse"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// streamGuard stands between an attempt's capture and the client for a
// streamed answer of a hooked target. It reads the OpenAI-format events
// the client is sent, assembles the answer's text, and just before
// "data: [DONE]" runs the after-hooks on it and sends their results (and
// the before-hooks') in a final `data: {"hook_results":…}` event.
//
// When the after-hooks can deny, the stream is held: nothing reaches the
// client until the verdict, and at most max_response_body bytes are kept
// (a longer stream fails the attempt with a 502). The held stream then
// comes back to the guardStep as a held answer, judged like a cached
// stream: withheld with a 446, or sent whole.
type streamGuard struct {
	ctx  context.Context
	gs   *guardSession
	out  *responder
	info *answerInfo
	hold bool
	max  int64

	split   sse.Splitter
	each    sse.Func
	text    guardrails.StreamText
	sawDone bool
	judged  bool
	werr    error

	// A held stream: what the capture committed, and its bytes.
	status   int
	header   http.Header
	buf      bytes.Buffer
	overflow bool
}

// streamGuard returns the guard for a streamed attempt of t, or nil when
// t's stream needs none (no after-hooks and no before results to report).
func (gs *guardSession) streamGuard(ctx context.Context, t *routing.Target, out *responder, info *answerInfo, max int64) *streamGuard {
	if gs == nil || gs.cur.t != t || (len(t.AfterRequestHooks) == 0 && !guardrails.HasResults(gs.cur.before, nil)) {
		return nil
	}
	sg := &streamGuard{ctx: ctx, gs: gs, out: out, info: info, hold: gs.holdStream[t], max: max}
	sg.text.Max = int(min(max, guardrails.DefaultStreamTextMax))
	sg.each = sg.event
	return sg
}

// commit sends the stream's status and headers, with 246 when a
// before-hook failed; a held stream keeps them for later.
func (sg *streamGuard) commit(status int, h http.Header) {
	if sg.hold {
		sg.status, sg.header = status, h
		return
	}
	sg.out.commit(guardrails.Status(sg.gs.cur.before, nil, status), h, sg.info)
}

// Header implements http.ResponseWriter; headers go out through commit.
func (sg *streamGuard) Header() http.Header { return sg.out.Header() }

// WriteHeader implements http.ResponseWriter; commit sends the status.
func (sg *streamGuard) WriteHeader(int) {}

// Write takes the client's stream bytes.
func (sg *streamGuard) Write(p []byte) (int, error) {
	if sg.hold {
		if int64(sg.buf.Len()+len(p)) > sg.max {
			sg.overflow = true
			sg.buf = bytes.Buffer{}
			return 0, errResponseTooLarge
		}
		return sg.buf.Write(p)
	}
	if sg.werr != nil {
		return 0, sg.werr
	}
	if err := sg.split.Feed(p, sg.each); err != nil {
		return 0, err
	}
	if sg.werr != nil {
		return 0, sg.werr
	}
	return len(p), nil
}

// event passes one event on, judging the answer at [DONE].
func (sg *streamGuard) event(ev *sse.Event) bool {
	if ev.HasData {
		if bytes.Equal(bytes.TrimSpace(ev.Data), sseDone) {
			sg.sawDone = true
			if ev := sg.judge(); ev != nil {
				if _, err := sg.out.Write(ev); err != nil {
					sg.werr = err
					return false
				}
			}
		} else {
			sg.text.Add(ev.Data)
		}
	}
	if _, err := sg.out.Write(ev.Raw); err != nil {
		sg.werr = err
		return false
	}
	return true
}

// judge runs the after-hooks on the assembled text, once, and returns
// the results event to send (nil when there are no results).
func (sg *streamGuard) judge() []byte {
	if sg.judged {
		return nil
	}
	sg.judged = true
	cur := &sg.gs.cur
	after, err := sg.gs.rn.After(sg.ctx, cur.t.AfterRequestHooks, &cur.req, &guardrails.Answer{Text: sg.text.String(), Status: http.StatusOK})
	if err != nil {
		return nil // compiled when the request was planned; cannot happen
	}
	recordVerdicts("output", after)
	cur.after = after
	if !guardrails.HasResults(cur.before, after) {
		return nil
	}
	return guardrails.StreamEvent(cur.before, after)
}

// end passes on a last event that lacked its blank line, and judges a
// stream that ended without [DONE] (for the log; nothing more is sent).
func (sg *streamGuard) end() {
	if sg.hold {
		return
	}
	sg.split.End(sg.each)
	sg.judge()
}

// FlushError flushes the client, unless the stream is held.
func (sg *streamGuard) FlushError() error {
	if sg.hold {
		return nil
	}
	return sg.out.FlushError()
}

// Unwrap lets http.ResponseController reach the client's writer.
func (sg *streamGuard) Unwrap() http.ResponseWriter { return sg.out.w }

// heldOutcome ends an attempt whose successful stream was held: the
// stream (complete, or the reason it is not) becomes the attempt's held
// answer, judged by the guardStep. Nothing reached the client, so a
// failure here may still be retried or fallen back from.
func (sg *streamGuard) heldOutcome(e *executor, c *capture, res *result, aborted bool) routing.Outcome {
	t := res.target
	tooLarge := func() routing.Outcome {
		return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s sent a stream larger than the gateway's max_response_body of %d bytes, which must be held for its output guardrails", t.Settings.Provider, sg.max).WithCode("response_too_large"), routing.CauseNone)
	}
	switch {
	case sg.overflow:
		return tooLarge()
	case aborted && e.r.Context().Err() != nil:
		res.err = "client closed the connection mid-response"
		return routing.Outcome{Status: StatusClientClosed, Committed: true, Cause: routing.CauseClientGone, Result: res}
	case aborted:
		return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s's stream broke off before it completed", t.Settings.Provider).WithCode("upstream_incomplete"), routing.CauseNone)
	}
	if err := c.finish(); err != nil {
		return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s's stream could not be translated: %v", t.Settings.Provider, err), routing.CauseNone)
	}
	res.usage, res.partialUsage = c.usage, c.partialUsage
	if sg.overflow {
		return tooLarge()
	}
	if !streamComplete(c.call.Op, sg.buf.Bytes()) {
		return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s's stream ended before it completed", t.Settings.Provider).WithCode("upstream_incomplete"), routing.CauseNone)
	}
	res.held = &heldAnswer{status: sg.status, header: sg.header, body: sg.buf.Bytes(), stream: true}
	return routing.Outcome{Status: sg.status, Result: res}
}

// messageStop is the event that ends an Anthropic Messages stream.
var messageStop = []byte(`"type":"message_stop"`)

// responsesTerminal are the events that end a Responses API stream,
// which has no [DONE].
var responsesTerminal = [...][]byte{[]byte(`"type":"response.completed"`), []byte(`"type":"response.incomplete"`), []byte(`"type":"response.failed"`)}

// streamComplete reports whether a held stream of op ended as its format
// ends a complete answer: [DONE], a Messages stream's message_stop, or a
// Responses stream's terminal event.
func streamComplete(op providers.Operation, body []byte) bool {
	switch op {
	case providers.OpMessages:
		return bytes.Contains(body, messageStop)
	case providers.OpResponses:
		for _, ev := range responsesTerminal {
			if bytes.Contains(body, ev) {
				return true
			}
		}
	}
	return bytes.Contains(body, sseDoneEvent)
}

// streamText assembles the text of a complete SSE answer.
func streamText(body []byte) string {
	var sp sse.Splitter
	var st guardrails.StreamText
	fn := func(ev *sse.Event) bool {
		if ev.HasData {
			st.Add(ev.Data)
		}
		return true
	}
	_ = sp.Feed(body, fn)
	sp.End(fn)
	return st.String()
}

// withHookEvent returns a complete SSE answer with the hook results event
// inserted before its "data: [DONE]" (or at its end).
func withHookEvent(body, results []byte) []byte {
	ev := make([]byte, 0, len(results)+24)
	ev = append(append(append(ev, `data: {"hook_results":`...), results...), "}\n\n"...)
	out := make([]byte, 0, len(body)+len(ev)+2)
	var sp sse.Splitter
	inserted := false
	fn := func(e *sse.Event) bool {
		if !inserted && e.HasData && bytes.Equal(bytes.TrimSpace(e.Data), sseDone) {
			out = append(out, ev...)
			inserted = true
		}
		out = append(out, e.Raw...)
		return true
	}
	_ = sp.Feed(body, fn)
	sp.End(fn)
	if !inserted {
		if n := len(out); n > 0 && out[n-1] != '\n' {
			out = append(out, "\n\n"...)
		}
		out = append(out, ev...)
	}
	return out
}
