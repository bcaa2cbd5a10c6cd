package ingress

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

const varBody = "llm_gateway.request_body"

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
