// Package apierror writes the errors the gateway produces itself in the
// OpenAI error envelope, so every OpenAI SDK shows them as it shows a
// provider's own errors.
package apierror

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Error types used in the envelope's "type" field. They follow OpenAI's
// vocabulary where one exists so SDK error classes map naturally.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_exceeded"
	TypeTimeout        = "timeout_error"
	TypeUpstream       = "upstream_error"
	TypeServer         = "server_error"
	TypeUnavailable    = "service_unavailable"
)

// HeaderGatewayError marks responses the gateway generated itself, so a
// client can tell them from errors a provider returned.
const HeaderGatewayError = "x-gateway-error"

// Error is a gateway error with its HTTP status. It satisfies error so the
// pipeline can return it through ordinary Go error paths.
type Error struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// New returns an Error with the given status, type and message.
func New(status int, typ, msg string) *Error {
	return &Error{Status: status, Type: typ, Message: msg}
}

// Newf is New with a formatted message.
func Newf(status int, typ, format string, args ...any) *Error {
	return New(status, typ, fmt.Sprintf(format, args...))
}

// BadRequest returns a 400 naming the offending parameter.
func BadRequest(param, format string, args ...any) *Error {
	e := Newf(http.StatusBadRequest, TypeInvalidRequest, format, args...)
	if param != "" {
		e.Param = param
	}
	return e
}

// WithCode sets the machine-readable code and returns e.
func (e *Error) WithCode(code string) *Error {
	e.Code = code
	return e
}

// As extracts an *Error from err, or wraps any other error as a 500 whose
// message does not leak the internal error text.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return New(http.StatusInternalServerError, TypeServer, "internal gateway error")
}

type envelope struct {
	Error *Error `json:"error"`
}

// Body returns the JSON envelope for e.
func (e *Error) Body() []byte {
	b, _ := json.Marshal(envelope{Error: e})
	return b
}

// Write sends e as the whole response.
func Write(w http.ResponseWriter, e *Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(HeaderGatewayError, "true")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

// SSEEvent returns e as a server-sent event, used to end a stream that
// failed after its first byte reached the client.
func (e *Error) SSEEvent() []byte {
	b := e.Body()
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	out = append(out, "\n\n"...)
	return out
}
