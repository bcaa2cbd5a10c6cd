package messages

import (
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// Anthropic's error types; the SDKs pick their error class by status, and
// show the type.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeBilling        = "billing_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeTooLarge       = "request_too_large"
	TypeRateLimit      = "rate_limit_error"
	TypeTimeout        = "timeout_error"
	TypeAPI            = "api_error"
	TypeOverloaded     = "overloaded_error"
)

// TypeForStatus is the Anthropic error type of an HTTP status. Statuses
// Anthropic does not use (the gateway's 446 guardrail denial) keep
// fallback, the gateway's own type, when there is one.
func TypeForStatus(status int, fallback string) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return TypeInvalidRequest
	case http.StatusUnauthorized:
		return TypeAuthentication
	case http.StatusPaymentRequired:
		return TypeBilling
	case http.StatusForbidden:
		return TypePermission
	case http.StatusNotFound:
		return TypeNotFound
	case http.StatusRequestEntityTooLarge:
		return TypeTooLarge
	case http.StatusTooManyRequests:
		return TypeRateLimit
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return TypeTimeout
	case 529, http.StatusServiceUnavailable:
		return TypeOverloaded
	}
	if status >= 500 {
		return TypeAPI
	}
	if fallback != "" {
		return fallback
	}
	return TypeInvalidRequest
}

// ErrorBody is an error in Anthropic's shape.
func ErrorBody(typ, message string) []byte {
	b := make([]byte, 0, 64+len(message))
	b = append(b, `{"type":"error","error":{"type":`...)
	b = oaiwire.AppendString(b, typ)
	b = append(b, `,"message":`...)
	b = oaiwire.AppendString(b, message)
	return append(b, "}}"...)
}

// ErrorEvent is an error as the Messages stream's error event.
func ErrorEvent(typ, message string) []byte {
	body := ErrorBody(typ, message)
	b := make([]byte, 0, len(body)+24)
	b = append(b, "event: error\ndata: "...)
	b = append(b, body...)
	return append(b, "\n\n"...)
}

// IsError reports whether body is already an error in Anthropic's shape.
func IsError(body []byte) bool {
	return gjson.GetBytes(body, "type").String() == "error" && gjson.GetBytes(body, "error.type").Exists()
}

// Reshape returns an error answer of the given status in Anthropic's
// shape: a body already in it is kept as it is; the OpenAI envelope (the
// gateway's own errors, translated targets' errors) and the bare
// {"message":…} of AWS become {"type":"error","error":{"type","message"}},
// the type following the status. Other top-level members of the
// envelope (a guardrail denial's hook_results) are kept beside it.
func Reshape(status int, body []byte) []byte {
	if jsonlimit.Object(body) != nil {
		return ErrorBody(TypeForStatus(status, ""), "the provider answered "+http.StatusText(status)+": "+oaiwire.Prefix(body, 256))
	}
	if IsError(body) {
		return body
	}
	root := gjson.ParseBytes(body)
	e := root.Get("error")
	msg, typ := e.Get("message").String(), e.Get("type").String()
	switch {
	case e.Type == gjson.String:
		msg, typ = e.String(), ""
	case !e.IsObject():
		msg = root.Get("message").String()
		if msg == "" {
			msg = root.Get("Message").String()
		}
	}
	if msg == "" {
		msg = "the provider answered " + http.StatusText(status)
	}
	out := ErrorBody(TypeForStatus(status, typ), msg)
	extra := false
	root.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "error" || k.Str == "type" || k.Str == "message" || k.Str == "Message" {
			return true
		}
		if !extra {
			out = out[:len(out)-1] // reopen the object
			extra = true
		}
		out = append(out, ',')
		out = append(out, k.Raw...)
		out = append(out, ':')
		out = append(out, v.Raw...)
		return true
	})
	if extra {
		out = append(out, '}')
	}
	return out
}
