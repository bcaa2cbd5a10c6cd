package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
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

// responder is the only code that writes to the client: errors, held
// answers, the start of a passed-through answer or stream and its bytes,
// stream error events and control-plane answers. It adds the gateway's
// headers to whatever it sends, and notes when the first byte left.
type responder struct {
	w       http.ResponseWriter
	alias   bool   // the client used the alias header prefix
	traceID string // set once the headers are parsed
	// status is the status sent, 0 before the headers went out.
	status    int
	firstByte time.Time
	// adapter, when set, converts every answer back to the client's
	// format (see FormatAdapter).
	adapter *adaptation
	// info describes the answer sent, for the placeholders.
	info *answerInfo
	// cost is the x-gateway-cost value of a held answer (observe.go).
	cost string
}

// answerInfo describes where an answer came from, for the gateway's
// response headers.
type answerInfo struct {
	target *routing.Target
	try    int
	// label is the cache status of the answering target.
	label string
}

// heldAnswer is a complete answer the gateway holds before sending it:
// a failure the router may yet replace, or a success held to check,
// translate, store or wrap it.
type heldAnswer struct {
	status int
	header http.Header
	body   []byte
	// stream is set for a held SSE transcript (a cached stream).
	stream bool
}

func (o *responder) committed() bool { return o.status != 0 }

// gatewayHeaders adds the gateway's response headers, under the alias
// prefix too when the client used it.
func (o *responder) gatewayHeaders(h http.Header, info *answerInfo) {
	set := func(i int, v string) {
		if v == "" {
			return
		}
		vv := []string{v}
		h[respHeaderKeys[i][0]] = vv
		if o.alias {
			h[respHeaderKeys[i][1]] = vv
		}
	}
	set(0, o.traceID)
	if info == nil {
		return
	}
	o.info = info
	if t := info.target; t != nil {
		set(1, t.Settings.Provider)
		set(2, t.Path)
		set(3, strconv.Itoa(info.try))
	}
	set(4, info.label)
	o.costHeader(h)
}

// respHeaderKeys are the gateway's response header names, canonical,
// under the gateway prefix and the alias prefix: computed once, because
// canonicalising a lower-case name allocates on every request.
var respHeaderKeys = func() [5][2]string {
	var k [5][2]string
	for i, name := range []string{RespTraceID, RespProvider, RespLastUsedIndex, RespRetryCount, RespCacheStatus} {
		k[i] = [2]string{http.CanonicalHeaderKey(ingress.Prefix + name), http.CanonicalHeaderKey(ingress.AliasPrefix + name)}
	}
	return k
}()

// commit sends the status and headers of an answer whose body follows
// through Write.
func (o *responder) commit(status int, h http.Header, info *answerInfo) {
	dst := o.w.Header()
	for k, v := range h {
		dst[k] = v
	}
	o.gatewayHeaders(dst, info)
	o.status = status
	o.firstByte = time.Now()
	o.w.WriteHeader(status)
}

// Header, WriteHeader and Write make the responder the writer of a
// passed-through body; the headers went out through commit.
func (o *responder) Header() http.Header { return o.w.Header() }

// WriteHeader is a no-op: commit sends the headers.
func (o *responder) WriteHeader(int) {}

func (o *responder) Write(p []byte) (int, error) {
	if ad := o.adapter; ad != nil {
		if ad.stream == nil {
			ad.stream = ad.a.Stream(ad.req, flushWriter{w: o.w})
		}
		return ad.stream.Write(p)
	}
	return o.w.Write(p)
}

// FlushError flushes the client's connection.
func (o *responder) FlushError() error { return flushClient(o.w) }

// Unwrap lets http.ResponseController reach the client's writer.
func (o *responder) Unwrap() http.ResponseWriter { return o.w }

// error writes a gateway-made error in OpenAI's envelope.
func (o *responder) error(e *apierror.Error, info *answerInfo) {
	if o.committed() {
		return
	}
	o.gatewayHeaders(o.w.Header(), info)
	o.status = e.Status
	o.firstByte = time.Now()
	apierror.Write(o.w, e)
}

// streamError ends a stream that already started with an error event.
func (o *responder) streamError(e *apierror.Error) {
	_, _ = o.w.Write(e.SSEEvent())
	_ = flushClient(o.w)
}

// held writes a complete answer. A success of a prompt completion is
// wrapped in its envelope, and one of an adapted call converted back.
func (o *responder) held(a *heldAnswer, info *answerInfo, envelope bool) {
	if o.committed() {
		return
	}
	header, body := a.header, a.body
	ok := a.status >= 200 && a.status < 300
	if ok && o.adapter != nil && !a.stream {
		out, err := o.adapter.fromChat(body)
		if err != nil {
			o.error(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "the answer could not be converted: %v", err), info)
			return
		}
		body = out
		header = http.Header{"Content-Type": {"application/json"}}
	}
	if ok && envelope {
		if jsonlimit.Object(body) != nil {
			// The provider's answer broke off after it began; being
			// held, it can still be reported as the failure it is.
			o.error(apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "the provider's response was incomplete"), info)
			return
		}
		h := header.Clone()
		o.gatewayHeaders(h, info)
		header, body = promptEnvelope(h, body)
	}
	dst := o.w.Header()
	for k, v := range header {
		dst[k] = v
	}
	if a.stream {
		dst.Del("Content-Length")
	} else {
		dst.Set("Content-Length", strconv.Itoa(len(body)))
	}
	o.gatewayHeaders(dst, info)
	o.status = a.status
	o.firstByte = time.Now()
	o.w.WriteHeader(a.status)
	_, _ = o.w.Write(body)
}

// control lets a control-plane handler answer, with the gateway's
// headers, and returns the status it sent.
func (o *responder) control(serve func(w http.ResponseWriter)) int {
	o.gatewayHeaders(o.w.Header(), nil)
	rec := caddyhttp.NewResponseRecorder(o.w, nil, nil)
	serve(rec)
	o.status = rec.Status()
	return o.status
}
