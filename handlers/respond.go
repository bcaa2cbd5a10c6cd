package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
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
	// RespErrorType names the class of a provider's error answer
	// (providers.ErrorClass), on error answers that have one.
	RespErrorType = "error-type"
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
	// adapter, when set, converts the answers of translated targets
	// back to the client's format (see FormatAdapter); ctx is the
	// request's, for what the adapter stores.
	adapter FormatAdapter
	ctx     context.Context
	// stream converts the stream of a translated target, once one
	// started.
	stream AdaptedStream
	// info describes the answer sent, for the placeholders.
	info *answerInfo
	// cost is the x-gateway-cost value of a held answer (observe.go).
	cost string
	// shape, when set, writes errors in the client's API's shape.
	shape ErrorShaper
	// text counts the generated text a stream delivered (sse.go).
	text deliveredText
	// passthrough marks a call in the provider's own API (OpProxy): its
	// error bodies are the provider's and are sent as they came.
	passthrough bool
}

// ErrorShaper writes the errors of an API whose clients read another
// error shape than OpenAI's (Anthropic's Messages API, messages.go).
type ErrorShaper interface {
	// ShapeError returns an error answer's body (the gateway's envelope
	// or a provider's) in the API's shape.
	ShapeError(status int, body []byte) []byte
	// StreamError is the event that ends a started stream with e.
	StreamError(e *apierror.Error) []byte
}

// answerInfo describes where an answer came from, for the gateway's
// response headers.
type answerInfo struct {
	target *routing.Target
	try    int
	// label is the cache status of the answering target.
	label string
	// adapted marks an answer of a translated target: a chat
	// completion to convert back to the client's format.
	adapted bool
	// errType is the class of a provider's error answer.
	errType providers.ErrorClass
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
	// results is the hook_results object attached to a JSON body, kept
	// so an answer converted to the client's API (Messages, Responses)
	// carries it too: the conversion keeps only what that API has.
	results []byte
}

func (o *responder) committed() bool { return o.status != 0 }

// gatewayHeaders adds the gateway's response headers, under the alias
// prefix too when the client used it.
func (o *responder) gatewayHeaders(h http.Header, info *answerInfo) {
	// One backing array for the values, so the headers cost one
	// allocation rather than one each.
	vals := make([]string, 0, len(respHeaderKeys))
	set := func(i int, v string) {
		if v == "" {
			return
		}
		vals = append(vals, v)
		n := len(vals)
		vv := vals[n-1 : n : n]
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
	set(5, string(info.errType))
	o.costHeader(h)
}

// respHeaderKeys are the gateway's response header names, canonical,
// under the gateway prefix and the alias prefix: computed once, because
// canonicalising a lower-case name allocates on every request.
var respHeaderKeys = func() [6][2]string {
	var k [6][2]string
	for i, name := range []string{RespTraceID, RespProvider, RespLastUsedIndex, RespRetryCount, RespCacheStatus, RespErrorType} {
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
	if o.adapter != nil && info != nil && info.adapted && status >= 200 && status < 300 {
		o.stream = o.adapter.Stream(o.ctx, flushWriter{w: o.w})
	}
}

// Header, WriteHeader and Write make the responder the writer of a
// passed-through body; the headers went out through commit.
func (o *responder) Header() http.Header { return o.w.Header() }

// WriteHeader is a no-op: commit sends the headers.
func (o *responder) WriteHeader(int) {}

func (o *responder) Write(p []byte) (int, error) {
	o.text.add(p)
	if o.stream != nil {
		return o.stream.Write(p)
	}
	return o.w.Write(p)
}

// endStream ends a converted stream (failed says it broke off); without
// one it does nothing.
func (o *responder) endStream(failed error) {
	if o.stream != nil {
		_ = o.stream.Close(failed)
		o.stream = nil
	}
}

// FlushError flushes the client's connection.
func (o *responder) FlushError() error {
	if o.stream != nil {
		// A converted stream writes through a flushWriter, which has
		// flushed what it wrote: a second flush would be empty.
		return nil
	}
	return flushClient(o.w)
}

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
	class := classOf(info)
	if o.shape != nil {
		writeShapedError(o.w, e.Status, classBody(o.shape.ShapeError(e.Status, e.Body()), class, true))
		return
	}
	if class != "" {
		writeShapedError(o.w, e.Status, classBody(e.Body(), class, false))
		return
	}
	apierror.Write(o.w, e)
}

// streamError ends a stream that already started with an error event.
func (o *responder) streamError(e *apierror.Error) {
	if o.stream != nil {
		// The converted stream ends in its own format's failure.
		_, _ = o.stream.Write(e.SSEEvent())
		o.endStream(e)
		return
	}
	if o.shape != nil {
		_, _ = o.w.Write(o.shape.StreamError(e))
		_ = flushClient(o.w)
		return
	}
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
	convert := ok && o.adapter != nil && info != nil && info.adapted
	if !ok && o.shape != nil {
		body = o.shape.ShapeError(a.status, body)
	}
	if !ok && !o.passthrough && !a.stream && header.Get("Content-Encoding") == "" {
		body = classBody(body, classOf(info), o.shape != nil)
	}
	if convert && !a.stream {
		out, err := o.adapter.FromChat(o.ctx, body)
		if err != nil {
			ae, isAPI := err.(*apierror.Error)
			if !isAPI {
				ae = apierror.Newf(http.StatusBadGateway, apierror.TypeUpstream, "the answer could not be converted: %v", err)
			}
			o.error(ae, info)
			return
		}
		if len(a.results) > 0 {
			out = attachResults(out, a.results)
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
	if convert && a.stream {
		// A held stream (a cached answer) of a translated target.
		st := o.adapter.Stream(o.ctx, flushWriter{w: o.w})
		_, err := st.Write(body)
		_ = st.Close(err)
		return
	}
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

// classOf is the error class info names, "" without one.
func classOf(info *answerInfo) providers.ErrorClass {
	if info == nil {
		return ""
	}
	return info.errType
}

// classBody returns an error answer's body carrying its class, as
// x-gateway-error-type does, so a client reading only the body (an SDK's
// error object) sees it too: error.error_type is the class, and in
// OpenAI's envelope error.code is the class when the provider gave no
// code (null or absent), the member OpenAI's SDKs expose. The flat error
// of vLLM, SGLang and Mistral ({"object":"error","message":…}), which
// OpenAI's SDKs do not read, becomes that envelope. anthropic says the
// body is in Anthropic's shape (the Messages API's paths), where only
// error_type is added. A body that is not one of these, or not strict
// JSON, is returned as it is.
func classBody(body []byte, class providers.ErrorClass, anthropic bool) []byte {
	if class == "" || jsonlimit.Object(body) != nil {
		return body
	}
	e, ok := jsonlimit.Member(body, "error")
	if !ok || e[0] != '{' {
		obj, isObj := jsonlimit.Member(body, "object")
		if anthropic || ok || !isObj || string(obj) != `"error"` {
			return body
		}
		flat, err := sjson.DeleteBytes(body, "object")
		if err != nil {
			return body
		}
		body, e = append(append([]byte(`{"error":`), flat...), '}'), flat
	}
	out := body
	var err error
	if !anthropic {
		if code, has := jsonlimit.Member(e, "code"); !has || string(code) == "null" {
			if out, err = sjson.SetBytes(out, "error.code", string(class)); err != nil {
				return body
			}
		}
	}
	if out, err = sjson.SetBytes(out, "error.error_type", string(class)); err != nil {
		return body
	}
	return out
}
