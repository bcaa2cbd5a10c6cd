package handlers

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/logfilter"
)

// An attempt goes upstream through the provisioned http transport itself
// (Caddy's reverse_proxy transport module, with the user's `transport
// http` options), not through a reverse_proxy handler. The handler's own
// per-call work (a second request clone, upstream selection, replacer
// variables, header operations, the X-Forwarded-* headers the gateway
// must drop again) was the largest part of what the gateway added to a
// request over plain reverse_proxy, and none of it applies: the gateway
// chooses the host, builds the request and judges the answer itself.
// send does the part of reverse_proxy that does apply: hop-by-hop
// headers, status, and a body copied as it arrives, flushed event by
// event when it streams.

// hopHeaders are the response headers that describe one connection, not
// the answer (as reverse_proxy strips them, Alt-Svc included: the client
// talks to the gateway, not the provider).
var hopHeaders = [...]string{
	"Alt-Svc", "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// copyBufSize is the read size of an answer's body: an SSE read rarely
// fills it, and a JSON answer usually comes in one read.
const copyBufSize = 32 << 10

// maxPrealloc bounds the buffer allocated for a held answer on the word of
// its Content-Length.
const maxPrealloc = 1 << 20

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// send makes one round trip through rt and copies the answer into c as it
// arrives. err is a failure before any answer (nothing reached c);
// aborted reports that the body broke off, or c refused more of it
// (too large, client gone), after its status was given to c.
func (e *executor) send(rt http.RoundTripper, c *capture, req *http.Request) (err error, aborted bool) {
	start := time.Now()
	res, err := rt.RoundTrip(req)
	e.logRoundTrip(req, res, start, err)
	if err != nil {
		return err, false
	}
	defer res.Body.Close()
	h := c.header
	for k, v := range res.Header {
		// The response is the gateway's to keep: its value slices are
		// shared, not copied.
		h[k] = v
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
	c.WriteHeader(res.StatusCode)
	if c.mode == modeHold && res.ContentLength > 0 && res.ContentLength <= min(c.maxBody, maxPrealloc) {
		// A held answer of known length is read into one allocation of
		// that length. A longer one grows with the bytes that actually
		// arrive: a declared length alone does not take memory.
		c.buf = *bytes.NewBuffer(make([]byte, 0, res.ContentLength))
	}
	// Streams are flushed after every read, as reverse_proxy flushes an
	// event stream or an answer of unknown length.
	flush := res.ContentLength < 0 || isEventStream(res.Header)
	if err := copyBody(c, res.Body, flush); err != nil {
		if c.mode == modeHold {
			// A held answer cut short is never read: its memory
			// and reservation go back now, not when the request
			// ends.
			c.dropHeld()
		}
		return nil, true
	}
	// An answer held in chunks is joined once it is whole.
	if err := c.join(); err != nil {
		return nil, true
	}
	return nil, false
}

// copyBody copies body into c, flushing after each write when flush is
// set. It returns the first read, write or flush error.
func copyBody(c *capture, body io.Reader, flush bool) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := c.Write(buf[:n]); err != nil {
				return err
			}
			if flush {
				if err := c.FlushError(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// logRoundTrip writes the DEBUG "upstream roundtrip" line operators know
// from reverse_proxy: the upstream request (credential headers masked),
// the duration, and the answer's status and headers or the error. Below
// DEBUG it costs one level check.
func (e *executor) logRoundTrip(req *http.Request, res *http.Response, start time.Time, err error) {
	ce := e.g.logger.Check(zapcore.DebugLevel, "upstream roundtrip")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.String("trace_id", e.out.traceID),
		zap.String("upstream", req.URL.Host),
		zap.Duration("duration", time.Since(start)),
		zap.Object("request", upstreamRequestLog{req}),
	}
	if err != nil {
		fields = append(fields, zap.Error(err))
	} else {
		fields = append(fields, zap.Object("headers", maskedHeader(res.Header)), zap.Int("status", res.StatusCode))
	}
	ce.Write(fields...)
}

// upstreamRequestLog is the upstream request as the DEBUG line shows it.
type upstreamRequestLog struct{ r *http.Request }

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (l upstreamRequestLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("method", l.r.Method)
	enc.AddString("host", l.r.URL.Host)
	enc.AddString("uri", l.r.URL.RequestURI())
	return enc.AddObject("headers", maskedHeader(l.r.Header))
}

// maskedHeader logs a header map with the value of every header the
// llm_secrets log encoder treats as a credential replaced (one list:
// logfilter.Sensitive), not only Authorization and Cookie.
type maskedHeader http.Header

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (h maskedHeader) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for k, v := range h {
		if logfilter.SensitiveName(k) {
			v = []string{"REDACTED"}
		}
		if err := enc.AddArray(k, zapcore.ArrayMarshalerFunc(func(ae zapcore.ArrayEncoder) error {
			for _, s := range v {
				ae.AppendString(s)
			}
			return nil
		})); err != nil {
			return err
		}
	}
	return nil
}
