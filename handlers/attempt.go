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
	"strconv"
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
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/upstream"
)

// StatusClientClosed is logged when the client went away mid-request.
const StatusClientClosed = 499

var nopNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// Attempt implements routing.Executor: it sends the request to one leaf
// target. A success is streamed to the client as it arrives (committing
// the request); a failure is held in x.last so the router can retry or
// fall back, and is written only if it turns out to be the final answer.
func (x *exchange) Attempt(ctx context.Context, t *routing.Target, try int) routing.Outcome {
	x.lastTarget, x.retries = t, try
	x.cacheState = x.leafCache
	x.entry.Provider = t.Settings.Provider
	x.entry.Error = ""
	return x.send(ctx, t)
}

// Deadline states of one attempt: the per-attempt timer and the start of
// a stream race to move it out of deadlineRunning, so a stream that has
// started is never cut by the timer, and a timed-out attempt is never
// reported as started.
const (
	deadlineRunning int32 = iota
	deadlineStarted
	deadlineExpired
)

func (x *exchange) send(ctx context.Context, t *routing.Target) routing.Outcome {
	x.last = nil
	p, _ := providers.Lookup(t.Settings.Provider)
	call := x.call
	body, err := x.bodyFor(t)
	if err != nil {
		// A prompt that cannot be rendered fails this target, and is
		// not retried: the next try would render the same.
		return x.fail(apierror.As(err), routing.CauseLocal)
	}
	call.Body = body
	if len(t.OverrideParams) > 0 || t.PromptID != "" {
		call.Model = gjson.GetBytes(call.Body, "model").String()
		call.Stream = gjson.GetBytes(call.Body, "stream").Bool()
	}
	u := providers.Upstream{Header: make(http.Header, 4)}
	if err := p.Prepare(&call, &t.Settings, &u); err != nil {
		return x.fail(apierror.As(err), routing.CauseLocal)
	}
	x.logDropped(p, &call, t)
	if call.Model != "" {
		x.entry.Model = call.Model
	}

	attemptCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deadline atomic.Int32
	var timer *time.Timer
	if t.RequestTimeoutMS > 0 {
		timer = time.AfterFunc(time.Duration(t.RequestTimeoutMS)*time.Millisecond, func() {
			if deadline.CompareAndSwap(deadlineRunning, deadlineExpired) {
				cancel()
			}
		})
		defer timer.Stop()
	}
	if needsEgressGuard(t) {
		attemptCtx = upstream.WithGuard(attemptCtx, x.g.guard)
	}
	r2, proxy := x.upstreamRequest(attemptCtx, t, &call, &u)

	c := &capture{
		client: x.w,
		call:   &call,
		tr:     p.Translator(call.Op),
		// A non-stream answer is held whole when it has a deadline to
		// meet, or when it will be cached (so it is stored before the
		// client has it all).
		hold:     (timer != nil || x.storeTarget == t) && !call.Stream,
		validate: !call.Stream && p.Translator(call.Op) == nil && checkedAnswer(call.Op),
		maxBody:  x.g.MaxResponseBody,
		header:   make(http.Header, 8),
		commit:   x.commitHeaders,
		onStart: func() {
			// A stream must start in time; once it has, the deadline no
			// longer applies.
			if call.Stream {
				deadline.CompareAndSwap(deadlineRunning, deadlineStarted)
			}
			x.entry.FirstByte = time.Now()
		},
	}
	if x.storeTarget == t {
		c.store = func(body []byte, stream bool) { x.store(t, c.status, body, stream) }
	}
	err, aborted := serveProxy(proxy, c, r2)
	// Whatever the upstream did, the timer may no longer fire; if it
	// already has, the attempt timed out.
	expired := !deadline.CompareAndSwap(deadlineRunning, deadlineStarted) && deadline.Load() == deadlineExpired

	switch {
	case aborted && c.committed:
		// Keep what the stream reported before it ended: usage is billed
		// even when the connection broke after the answer.
		if c.conv != nil {
			x.entry.Usage = c.conv.Usage()
		} else if c.sse != nil {
			x.entry.Usage = c.sse.usage
		}
		if x.r.Context().Err() != nil {
			// The client went away; there is no one to tell.
			x.entry.Error = "client closed the connection mid-response"
			return routing.Outcome{Status: c.status, Committed: true, Cause: routing.CauseClientGone}
		}
		// The upstream failed after bytes reached the client: end the
		// stream with an error event rather than a silent truncation.
		x.entry.Error = "upstream failed mid-response"
		if call.Stream {
			x.writeStreamError(apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the provider's stream failed before it completed"))
		} else {
			// A passed-through answer has no way to say it is cut but
			// a broken connection: a clean end would look complete.
			x.abort = true
		}
		return routing.Outcome{Status: c.status, Committed: true, Cause: routing.CauseStreamFailed}
	case c.committed:
		return x.finishCommitted(c)
	case c.tooLarge:
		return x.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s sent a response larger than the gateway's max_response_body of %d bytes", t.Settings.Provider, x.g.MaxResponseBody).WithCode("response_too_large"), routing.CauseNone)
	case expired:
		return x.fail(apierror.Newf(http.StatusRequestTimeout, apierror.TypeTimeout,
			"request to %s timed out after %d ms", t.Settings.Provider, t.RequestTimeoutMS).WithCode("request_timeout"), routing.CauseTimeout)
	case ctx.Err() != nil:
		return routing.Outcome{Status: StatusClientClosed, Committed: true, Cause: routing.CauseClientGone}
	case aborted && c.status != 0:
		// Headers arrived, then the body broke off while held.
		return x.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
			"provider %s's response broke off before it completed", t.Settings.Provider).WithCode("upstream_incomplete"), routing.CauseNone)
	case err != nil || aborted:
		e, cause := upstreamError(t, err)
		return x.fail(e, cause)
	case c.mode == modeHold:
		return x.deliverHeld(c, t)
	case c.mode == modeBuffer:
		body := c.buf.Bytes()
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
		x.last = &bufferedResponse{status: c.status, header: c.header, body: bytes.Clone(body)}
		o := routing.Outcome{Status: c.status}
		o.RetryAfter, o.HasRetryAfter = routing.ParseRetryAfter(c.header, time.Now())
		return o
	}
	// The upstream answered nothing at all.
	return x.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "provider %s sent an empty response", t.Settings.Provider), routing.CauseNone)
}

// finishCommitted completes an answer that was streamed or passed through
// to the client.
func (x *exchange) finishCommitted(c *capture) routing.Outcome {
	o := routing.Outcome{Status: c.status, Committed: true}
	if ferr := c.finish(); ferr != nil {
		x.entry.Error = "translating stream: " + ferr.Error()
		o.Cause = routing.CauseStreamFailed
	}
	op := c.call.Op
	if c.sse != nil && !c.sse.sawDone && (op == providers.OpChat || op == providers.OpCompletions) {
		x.entry.Error = "upstream stream ended without [DONE]"
		x.writeStreamError(apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the provider's stream ended before it completed"))
		o.Cause = routing.CauseStreamFailed
	}
	x.entry.Usage = c.usage
	return o
}

// serveProxy runs reverse_proxy, turning its abort panic (raised when the
// upstream body fails after headers were written) into a flag.
func serveProxy(proxy caddyhttp.MiddlewareHandler, c *capture, r *http.Request) (err error, aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	return proxy.ServeHTTP(c, r, nopNext), false
}

// deliverHeld writes a response that was held whole: translated, or
// passed through once it was known to be complete in time.
func (x *exchange) deliverHeld(c *capture, t *routing.Target) routing.Outcome {
	body := c.buf.Bytes()
	if c.tr != nil {
		out, usage, err := c.tr.Response(c.call, body)
		if err != nil {
			return x.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
				"provider %s returned a response the gateway could not parse: %q", t.Settings.Provider, prefix(body, 256)), routing.CauseNone)
		}
		body = out
		x.entry.Usage = usage
		c.header.Del("Content-Encoding")
		c.header.Set("Content-Type", "application/json")
	} else {
		if c.validate {
			if err := validAnswer(c.call.Op, body); err != nil {
				return x.fail(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream,
					"provider %s returned an invalid response (%v): %q", t.Settings.Provider, err, prefix(body, 256)).WithCode("invalid_upstream_response"), routing.CauseNone)
			}
		}
		x.entry.Usage = usageFromBody(body)
	}
	c.header.Set("Content-Length", strconv.Itoa(len(body)))
	if c.store != nil {
		c.store(body, false)
	}
	c.doCommit()
	_, _ = x.w.Write(body)
	return routing.Outcome{Status: c.status, Committed: true}
}

// needsEgressGuard reports whether t's upstream address came from client
// input and must pass the custom_host_allow policy.
func needsEgressGuard(t *routing.Target) bool { return t.Settings.CustomHost != "" }

// fail records a gateway-made error as the attempt's answer.
func (x *exchange) fail(e *apierror.Error, cause routing.Cause) routing.Outcome {
	h := make(http.Header, 2)
	h.Set("Content-Type", "application/json")
	h.Set(apierror.HeaderGatewayError, "true")
	x.last = &bufferedResponse{status: e.Status, header: h, body: e.Body()}
	x.entry.Error = e.Message
	return routing.Outcome{Status: e.Status, Cause: cause}
}

func (x *exchange) commitHeaders(status int, h http.Header) {
	dst := x.w.Header()
	for k, v := range h {
		dst[k] = v
	}
	x.setGatewayHeaders(dst)
	x.w.WriteHeader(status)
}

func (x *exchange) writeStreamError(e *apierror.Error) {
	_, _ = x.w.Write(e.SSEEvent())
	_ = flushClient(x.w)
}

// upstreamRequest builds the request reverse_proxy sends and picks the
// proxy (TLS or plain) for its scheme.
func (x *exchange) upstreamRequest(ctx context.Context, t *routing.Target, call *providers.Call, u *providers.Upstream) (*http.Request, caddyhttp.MiddlewareHandler) {
	src := x.r.Header
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

	ctx = withCredentials(ctx, h)
	r2 := x.r.WithContext(ctx)
	r2.Method = u.Method
	r2.Header = h
	target := *u.URL
	r2.URL = &target
	r2.Host = u.URL.Host
	r2.RequestURI = ""
	r2.TransferEncoding = nil
	r2.ContentLength = int64(len(u.Body))
	if len(u.Body) > 0 {
		r2.Body = io.NopCloser(bytes.NewReader(u.Body))
	} else {
		r2.Body = http.NoBody
	}

	host, port := u.URL.Hostname(), u.URL.Port()
	proxy := x.g.proxyPlain
	if u.URL.Scheme == "https" {
		proxy = x.g.proxyTLS
		if port == "" {
			port = "443"
		}
	} else if port == "" {
		port = "80"
	}
	caddyhttp.SetVar(ctx, upstream.VarDial, net.JoinHostPort(host, port))
	caddyhttp.SetVar(ctx, upstream.VarServerName, host)
	return r2, proxy
}

// skipProxyHeader reports client headers never passed through: the
// gateway's own, the client's credential (the provider's auth replaces
// it), and framing headers the transport sets itself.
func skipProxyHeader(k string) bool {
	switch k {
	case "Authorization", "Host", "Content-Length", "Expect", "Connection", "Cookie", "Proxy-Authorization":
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
		return apierror.BadRequest("custom_host", "%s", blocked.Error()).WithCode("custom_host_not_allowed"), routing.CauseLocal
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
func (x *exchange) logDropped(p providers.Provider, c *providers.Call, t *routing.Target) {
	fd, ok := p.(providers.FieldDropper)
	if !ok {
		return
	}
	ce := x.g.logger.Check(zapcore.DebugLevel, "request fields the provider does not accept were dropped")
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
		ce.Write(zap.String("trace_id", x.entry.TraceID), zap.String("provider", t.Settings.Provider),
			zap.String("target", t.Path), zap.Strings("fields", present))
	}
}
