package oaiwire

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// TypeForStatus is the envelope type for a provider error that names
// none, in OpenAI's vocabulary.
func TypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return apierror.TypeAuthentication
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return apierror.TypeNotFound
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return apierror.TypeTimeout
	case status == http.StatusTooManyRequests:
		return apierror.TypeRateLimit
	case status >= 500:
		return apierror.TypeServer
	}
	return apierror.TypeInvalidRequest
}

// ErrorBody returns the OpenAI envelope for a provider error. An empty
// message (a body the translator could not read) becomes one quoting a
// bounded prefix of the body, so the client still sees what was said.
func ErrorBody(provider string, status int, message, typ string, code any, body []byte) []byte {
	if message == "" {
		message = fmt.Sprintf("%s returned HTTP %d", provider, status)
		if p := Prefix(body, 512); p != "" {
			message += ": " + p
		}
	}
	if typ == "" {
		typ = TypeForStatus(status)
	}
	e := &apierror.Error{Status: status, Message: message, Type: typ, Code: code}
	return e.Body()
}

// Prefix returns at most n bytes of b as valid UTF-8, marking a cut.
func Prefix(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

// StreamError is the error event for a provider error inside a stream.
func StreamError(message, typ string, code any) *apierror.Error {
	if typ == "" {
		typ = apierror.TypeUpstream
	}
	return &apierror.Error{Status: http.StatusBadGateway, Message: message, Type: typ, Code: code}
}

// Truncated is the error event for a stream that ended before the
// provider said it was complete.
func Truncated(provider string) *apierror.Error {
	return StreamError(provider+"'s stream ended before it completed", apierror.TypeUpstream, "stream_truncated")
}

// Unsupported is the 400 for an endpoint a provider does not offer.
func Unsupported(provider, what string) *apierror.Error {
	return apierror.Newf(http.StatusBadRequest, apierror.TypeInvalidRequest, "%s is not supported by provider %q", what, provider).WithCode("unsupported_endpoint")
}
