package ingress

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/bodybuf"
)

const (
	varBody    = "llm_gateway.request_body"
	varBodyBuf = "llm_gateway.request_body_buffer"
)

// SetBody records the request body a handler before llm_gateway already
// read, so the gateway does not read (or buffer) it twice.
func SetBody(r *http.Request, body []byte) {
	caddyhttp.SetVar(r.Context(), varBody, body)
}

// Body returns the body recorded by SetBody.
func Body(r *http.Request) ([]byte, bool) {
	b, ok := caddyhttp.GetVar(r.Context(), varBody).([]byte)
	return b, ok
}

// SetBodyBuf records that the body given to SetBody lies in buf, a lent
// buffer its reader holds: the gateway may take it over (TakeBodyBuf) and
// give it back when its request ends. A buffer nobody takes is left to
// the garbage collector.
func SetBodyBuf(r *http.Request, buf *bodybuf.Buf) {
	caddyhttp.SetVar(r.Context(), varBodyBuf, buf)
}

// TakeBodyBuf returns the lent buffer of the recorded body, once: the
// caller now holds it and must Release it.
func TakeBodyBuf(r *http.Request) *bodybuf.Buf {
	buf, _ := caddyhttp.GetVar(r.Context(), varBodyBuf).(*bodybuf.Buf)
	if buf != nil {
		caddyhttp.SetVar(r.Context(), varBodyBuf, nil)
	}
	return buf
}

// ClearBody forgets the recorded body, so nothing that runs after the
// gateway gave a lent buffer back (a placeholder in a later log line)
// can read that memory through it.
func ClearBody(r *http.Request) {
	caddyhttp.SetVar(r.Context(), varBody, nil)
	caddyhttp.SetVar(r.Context(), varBodyBuf, nil)
}
