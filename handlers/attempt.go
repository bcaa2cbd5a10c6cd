package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/bodybuf"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// Deadline states of one attempt: the per-attempt timer and the start of
// a stream race to move it out of deadlineRunning, so a stream that has
// started is never cut by the timer, and a timed-out attempt is never
// reported as started.
const (
	deadlineRunning int32 = iota
	deadlineStarted
	deadlineExpired
)

// answerSink observes an attempt's complete successful answer; the
// attempt knows nothing of what it does with it.
type answerSink interface {
	// Hold reports whether a non-stream success must be held whole, so
	// the sink sees it before the client has all of it.
	Hold() bool
	// Limit bounds the stream transcript the sink may be given.
	Limit() int
	// Done receives a complete successful answer: a held body, or a
	// stream's OpenAI-format SSE transcript just before its [DONE].
	Done(status int, body []byte, stream bool)
}

// attempt sends one attempt of plan p: exactly what p says, to p's
// target. A success is streamed or passed through to the client as it
// arrives (committing the request) unless p holds it; a failure, or a
// held success, comes back in the outcome's result for the router to
// retry, fall back from, or end with.
func (e *executor) attempt(ctx context.Context, p attemptPlan) (out routing.Outcome) {
	t := p.target
	res := &result{answerInfo: answerInfo{target: t, try: p.try, label: p.label, adapted: p.adapted}, prompt: p.prompt}
	if p.err != nil {
		// A target that cannot be sent (a prompt that does not render)
		// fails, and is not retried: the next try would fail alike.
		return res.fail(apierror.As(p.err), routing.CauseLocal)
	}
	prov, _ := providers.Lookup(t.Settings.Provider)
	call := p.call(e.q)
	u := providers.Upstream{Header: make(http.Header, 4)}
	if t.GuardEgress {
		// Connections the provider makes itself (a service account's
		// token endpoint) pass the same policy.
		call.Egress = e.g.guard
	}
	if err := prov.Prepare(&call, &t.Settings, &u); err != nil {
		return res.fail(apierror.As(err), routing.CauseLocal)
	}
	e.logDropped(prov, &call, t)
	res.model = call.Model

	// Only a deadline needs a context of the attempt's own: without one
	// the attempt ends with the request, whose context the proxy watches.
	attemptCtx := ctx
	var deadline atomic.Int32
	var timer *time.Timer
	if t.RequestTimeoutMS > 0 {
		var cancel context.CancelFunc
		attemptCtx, cancel = context.WithCancel(ctx)
		defer cancel()
		timer = time.AfterFunc(time.Duration(t.RequestTimeoutMS)*time.Millisecond, func() {
			if deadline.CompareAndSwap(deadlineRunning, deadlineExpired) {
				cancel()
			}
		})
		defer timer.Stop()
	}
	if t.GuardEgress {
		attemptCtx = upstream.WithGuard(attemptCtx, e.g.guard)
	}
	attemptCtx, obs := e.observeStart(attemptCtx, &call, &u, t)
	defer func() { e.observeEnd(&obs, &call, t, out) }()
	r2, rt := e.upstreamRequest(attemptCtx, &call, &u, t)
	obs.span.Inject(r2.Header)

	tr := prov.Translator(call.Op)
	info := res.info()
	var client http.ResponseWriter = e.out
	commit := func(status int, h http.Header) { e.out.commit(status, h, info) }
	var sg *streamGuard
	if call.Stream {
		// Hooks judge the stream on its way (guardrails_stream.go).
		if sg = p.guard.streamGuard(ctx, t, e.out, info, e.g.MaxResponseBody); sg != nil {
			client, commit = sg, sg.commit
		}
	}
	held := holdReasons(call.Stream, p.hold, holdSink.when(p.sink != nil && p.sink.Hold()))
	c := &capture{
		client:    client,
		call:      &call,
		tr:        tr,
		hold:      held.holds(),
		validate:  !call.Stream && tr == nil && checkedAnswer(call.Op),
		mustHold:  held.must(),
		budget:    e.budget,
		heldTotal: &e.heldBytes,
		maxBody:   e.maxBody(),
		header:    make(http.Header, 8),
		commit:    commit,
		onStart: func() {
			// A stream must start in time; once it has, the deadline no
			// longer applies.
			if call.Stream {
				deadline.CompareAndSwap(deadlineRunning, deadlineStarted)
				obs.firstChunk = time.Now()
			}
		},
	}
	defer func() {
		// The sample least_latency averages: from the attempt's start to
		// the answer's first byte.
		if !c.firstByte.IsZero() {
			out.FirstByte = c.firstByte.Sub(obs.start)
		}
	}()
	if sink := p.sink; sink != nil {
		c.storeMax = sink.Limit()
		c.store = func(body []byte, stream bool) {
			if c.status >= 200 && c.status < 300 {
				sink.Done(c.status, body, stream)
			}
		}
	}
	err, aborted := e.send(rt, c, r2)
	// Whatever the upstream did, the timer may no longer fire; if it
	// already has, the attempt timed out.
	expired := !deadline.CompareAndSwap(deadlineRunning, deadlineStarted) && deadline.Load() == deadlineExpired
	if sg != nil && sg.hold && c.committed {
		// The stream waited for its output guardrails; none of it was sent.
		return sg.heldOutcome(e, c, res, aborted || err != nil)
	}

	switch {
	case aborted && c.committed:
		// Keep what the stream reported before it ended: usage is billed
		// even when the connection broke after the answer.
		res.usage, res.partialUsage = c.streamUsage()
		if e.r.Context().Err() != nil {
			// The client went away; there is no one to tell.
			res.err = "client closed the connection mid-response"
			return routing.Outcome{Status: c.status, Committed: true, Cause: routing.CauseClientGone, Result: res}
		}
		// The upstream failed after bytes reached the client: end the
		// stream with an error event rather than a silent truncation.
		res.err = "upstream failed mid-response"
		if call.Stream {
			e.out.streamError(apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the provider's stream failed before it completed"))
		} else {
			// A passed-through answer has no way to say it is cut but
			// a broken connection: a clean end would look complete.
			res.abort = true
		}
		return routing.Outcome{Status: c.status, Committed: true, Cause: routing.CauseStreamFailed, Result: res}
	case c.committed:
		return e.finishCommitted(c, res, sg)
	case c.overBudget:
		return res.fail(heldBudgetError(e.budget.Limit()), routing.CauseNone)
	case c.tooLarge:
		return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s sent a response larger than the gateway's max_response_body of %d bytes", t.Settings.Provider, e.g.MaxResponseBody).WithCode("response_too_large"), routing.CauseNone)
	case expired:
		return res.fail(apierror.Newf(http.StatusRequestTimeout, apierror.TypeTimeout,
			"request to %s timed out after %d ms", t.Settings.Provider, t.RequestTimeoutMS).WithCode("request_timeout"), routing.CauseTimeout)
	case ctx.Err() != nil:
		return routing.Outcome{Status: StatusClientClosed, Committed: true, Cause: routing.CauseClientGone, Result: res}
	case aborted && c.status != 0:
		// Headers arrived, then the body broke off while held.
		return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s's response broke off before it completed", t.Settings.Provider).WithCode("upstream_incomplete"), routing.CauseNone)
	case err != nil || aborted:
		ae, cause := upstreamError(t, err)
		return res.fail(ae, cause)
	case c.mode == modeHold:
		return e.held(c, res, &p)
	case c.mode == modeBuffer:
		body := c.buf.Bytes()
		// Classified from the provider's own body, before translation
		// rewrites it into OpenAI's envelope.
		res.errType = providers.Classify(prov, c.status, c.header, body)
		if c.tr != nil {
			body = c.tr.Error(&call, c.status, body)
			c.header.Del("Content-Encoding")
			c.header.Set("Content-Type", "application/json")
		} else if call.Op != providers.OpProxy && !isJSONBody(c.header, body) {
			// An HTML or text error page becomes an envelope with the
			// provider's status, so clients need one error path.
			body = apierror.Newf(c.status, apierror.TypeUpstream, "provider %s answered %d: %q",
				t.Settings.Provider, c.status, prefix(body, 256)).Body()
			c.header = http.Header{"Content-Type": {"application/json"}}
		}
		res.held = &heldAnswer{status: c.status, header: c.header, body: bytes.Clone(body)}
		o := routing.Outcome{Status: c.status, Result: res, ErrorType: res.errType}
		o.RetryAfter, o.HasRetryAfter = routing.ParseRetryAfter(c.header, time.Now())
		return o
	}
	// The upstream answered nothing at all.
	return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "provider %s sent an empty response", t.Settings.Provider), routing.CauseNone)
}

// finishCommitted completes an answer that was streamed or passed through
// to the client.
func (e *executor) finishCommitted(c *capture, res *result, sg *streamGuard) routing.Outcome {
	o := routing.Outcome{Status: c.status, Committed: true, Result: res}
	if ferr := c.finish(); ferr != nil {
		res.err = "translating stream: " + ferr.Error()
		o.Cause = routing.CauseStreamFailed
		if c.check != nil {
			// An answer passed through unheld (the held-answer budget
			// was spent) turned out malformed: its bytes are sent, so
			// only a broken connection can say it is not an answer.
			res.err = "invalid upstream response passed through unheld: " + ferr.Error()
			res.abort = true
		}
	}
	if sg != nil {
		sg.end()
	}
	op := c.call.Op
	if c.sse != nil && !c.sse.sawDone && (op == providers.OpChat || op == providers.OpCompletions) {
		res.err = "upstream stream ended without [DONE]"
		e.out.streamError(apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the provider's stream ended before it completed"))
		o.Cause = routing.CauseStreamFailed
	}
	res.usage, res.partialUsage = c.usage, c.partialUsage
	return o
}

// held completes an answer that was held whole: checked, translated, and
// handed to the sink; serve writes it once routing ends.
func (e *executor) held(c *capture, res *result, p *attemptPlan) routing.Outcome {
	body := c.buf.Bytes()
	t := res.target
	if c.tr != nil {
		out, usage, err := c.tr.Response(c.call, body)
		if err != nil {
			return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
				"provider %s returned a response the gateway could not parse: %q", t.Settings.Provider, prefix(body, 256)), routing.CauseNone)
		}
		body = out
		res.usage = usage
		c.header.Del("Content-Encoding")
		c.header.Set("Content-Type", "application/json")
	} else {
		if c.validate {
			usage, err := checkAnswer(c.call.Op, body)
			if err != nil {
				return res.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
					"provider %s returned an invalid response (%v): %q", t.Settings.Provider, err, prefix(body, 256)).WithCode("invalid_upstream_response"), routing.CauseNone)
			}
			res.usage = usage
		} else {
			res.usage = usageFromBody(body)
		}
	}
	if p.models != nil && c.status == http.StatusOK {
		body = keys.FilterModelList(body, p.models)
	}
	if c.store != nil {
		c.store(body, false)
	}
	res.held = &heldAnswer{status: c.status, header: c.header, body: body}
	return routing.Outcome{Status: c.status, Result: res}
}

// fail records a gateway-made error as the attempt's answer.
func (res *result) fail(ae *apierror.Error, cause routing.Cause) routing.Outcome {
	h := make(http.Header, 2)
	h.Set("Content-Type", "application/json")
	h.Set(apierror.HeaderGatewayError, "true")
	res.held = &heldAnswer{status: ae.Status, header: h, body: ae.Body()}
	res.err, res.refusal = ae.Message, observe.RefusalOf(ae)
	return routing.Outcome{Status: ae.Status, Cause: cause, Result: res}
}

// jsonContentType is the Content-Type of every JSON body sent upstream.
var jsonContentType = []string{"application/json"}

// jsonCall reports whether call's body is JSON the gateway checked or
// made: the operations whose body inspectBody reads as a JSON object
// (a translated target is always sent a chat completion), unless the
// client sent multipart (image edits).
func jsonCall(call *providers.Call, client http.Header) bool {
	if len(call.Body) == 0 {
		return false
	}
	switch call.Op {
	case providers.OpChat, providers.OpCompletions, providers.OpEmbeddings, providers.OpResponses, providers.OpImages, providers.OpSpeech:
	default:
		return false
	}
	ct := client.Get("Content-Type")
	return !strings.HasPrefix(ct, "multipart/")
}

// noUserAgent keeps net/http from sending its own User-Agent when the
// client's is not forwarded (as reverse_proxy does).
var noUserAgent = []string{""}

// upstreamRequest builds the request sent upstream and picks the
// transport (TLS or plain, trusted or guarded) for it.
func (e *executor) upstreamRequest(ctx context.Context, call *providers.Call, u *providers.Upstream, t *routing.Target) (*http.Request, http.RoundTripper) {
	src := e.r.Header
	h := make(http.Header, len(u.Header)+4)
	if call.Op == providers.OpProxy {
		for k, v := range src {
			if skipProxyHeader(k) {
				continue
			}
			h[k] = v
		}
	} else {
		for _, k := range []string{"Content-Type", "Accept", "Openai-Beta"} {
			if v := src[k]; len(v) > 0 {
				h[k] = v
			}
		}
		if jsonCall(call, src) {
			// The gateway parsed the body as JSON (and may have
			// rewritten it) whatever the client declared: curl -d
			// sends application/x-www-form-urlencoded, which
			// vLLM-style servers refuse with a 422. A multipart
			// upload keeps its own Content-Type and boundary.
			h["Content-Type"] = jsonContentType
		}
	}
	// Forwarded headers go first and the provider's own headers last, so a
	// forwarded name can never replace the stored credential or break a
	// request signature. Forwarding matches the name case-insensitively
	// and also its kebab form, which is what the portkey SDK sends for a
	// camelCase name.
	for _, name := range t.ForwardHeaders {
		if ingress.IsGatewayHeader(name) {
			continue
		}
		if v := src.Values(name); len(v) > 0 {
			h[http.CanonicalHeaderKey(name)] = v
		} else if kebab := kebabCase(name); kebab != name {
			if v := src.Values(kebab); len(v) > 0 {
				h[http.CanonicalHeaderKey(kebab)] = v
			}
		}
	}
	for k, v := range u.Header {
		h[k] = v
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = noUserAgent
	}

	r2 := e.r.WithContext(ctx)
	r2.Method = u.Method
	r2.Header = h
	target := *u.URL
	r2.URL = &target
	r2.Host = u.URL.Host
	r2.RequestURI = ""
	r2.TransferEncoding = nil
	r2.Trailer = nil
	// The client's Connection: close is about its own connection; the
	// provider connection stays in the pool.
	r2.Close = false
	r2.ContentLength = int64(len(u.Body) + len(u.Tail))
	if r2.ContentLength > 0 {
		newBody := upstreamBody(u.Body, u.Tail, e.q.body)
		r2.Body = newBody()
		// net/http may resend the body on a fresh connection when a
		// pooled one turns out closed.
		r2.GetBody = func() (io.ReadCloser, error) { return newBody(), nil }
	} else {
		r2.Body, r2.GetBody = http.NoBody, nil
	}

	guarded, tls := 0, 0
	if t.GuardEgress {
		guarded = 1
	}
	if u.URL.Scheme == "https" {
		tls = 1
		// The TLS transports take the server name from this variable:
		// a guarded dial connects to a checked IP literal, and the
		// certificate must still match the host name.
		caddyhttp.SetVar(ctx, upstream.VarServerName, u.URL.Hostname())
	}
	return r2, e.g.transports[guarded][tls]
}

// skipProxyHeader reports client headers never passed through: the
// gateway's own, the client's credential (the provider's auth replaces
// it), and framing headers the transport sets itself.
func skipProxyHeader(k string) bool {
	switch k {
	case "Authorization", "Host", "Content-Length", "Expect", "Cookie", "Proxy-Authorization",
		// Hop-by-hop headers describe the client's connection.
		"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return ingress.IsGatewayHeader(k)
}

// applyOverrides merges override_params shallowly into a JSON body.
func applyOverrides(body []byte, params map[string]json.RawMessage) []byte {
	out := body
	for k, v := range params {
		if b, err := sjson.SetRawBytes(out, escapeKey(k), v); err == nil {
			out = b
		}
	}
	return out
}

func escapeKey(k string) string {
	if !strings.ContainsAny(k, ".*?|#@\\:") {
		return k
	}
	var b strings.Builder
	for _, r := range k {
		if strings.ContainsRune(".*?|#@\\:", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// upstreamError maps a transport failure to a 502 (or 400 for a blocked
// custom host) without echoing URLs, which may carry credentials.
func upstreamError(t *routing.Target, err error) (*apierror.Error, routing.Cause) {
	var blocked *upstream.BlockedError
	if errors.As(err, &blocked) {
		return upstream.Refusal(), routing.CauseLocal
	}
	reason := "connection failed"
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		reason = "connection timed out"
	case err != nil && strings.Contains(err.Error(), "connection refused"):
		reason = "connection refused"
	case err != nil && strings.Contains(err.Error(), "no such host"):
		reason = "host not found"
	case errors.As(err, &ue):
		reason = "request failed"
	}
	return apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "could not reach provider %s: %s", t.Settings.Provider, reason).WithCode("upstream_unreachable"), routing.CauseUnreachable
}

func prefix(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// kebabCase turns "myHeader" into "my-header".
func kebabCase(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			if i > 0 && s[i-1] != '-' {
				b.WriteByte('-')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// logDropped notes, at debug level, request fields the provider's API has
// no place for and the translation therefore left out.
func (e *executor) logDropped(p providers.Provider, c *providers.Call, t *routing.Target) {
	fd, ok := p.(providers.FieldDropper)
	if !ok {
		return
	}
	ce := e.g.logger.Check(zapcore.DebugLevel, "request fields the provider does not accept were dropped")
	if ce == nil {
		return
	}
	var present []string
	for _, f := range fd.DroppedFields(c) {
		if gjson.GetBytes(c.Body, f).Exists() {
			present = append(present, f)
		}
	}
	if len(present) > 0 {
		ce.Write(zap.String("trace_id", e.out.traceID), zap.String("provider", t.Settings.Provider),
			zap.String("target", t.Path), zap.Strings("fields", present))
	}
}

// upstreamBody returns a maker of readers of what an upstream request
// sends: body, then tail. A body in the client's lent buffer is read from
// there, each reader holding the buffer until the transport closes it,
// which may be after the flight ended (internal/bodybuf).
func upstreamBody(body, tail []byte, buf *bodybuf.Buf) func() io.ReadCloser {
	return func() io.ReadCloser {
		var rc io.ReadCloser
		if buf.Owns(body) {
			rc = buf.NewReader(body)
		} else {
			rc = io.NopCloser(bytes.NewReader(body))
		}
		if len(tail) == 0 {
			return rc
		}
		return struct {
			io.Reader
			io.Closer
		}{io.MultiReader(rc, bytes.NewReader(tail)), rc}
	}
}
