package anthropic

import (
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// ClassifyError implements providers.ErrorClassifier.
func (provider) ClassifyError(status int, _ http.Header, body []byte) providers.ErrorClass {
	return Classify(status, body)
}

// Classify reads a Messages API error ({"type":"error","error":{"type",
// "message"}}). The type names the kind for rate limits
// (rate_limit_error, 429), overload (overloaded_error, 529) and billing
// (billing_error, 402); invalid_request_error covers a prompt over the
// context window ("prompt is too long: 208310 tokens > 200000 maximum"),
// a spent credit balance ("Your credit balance is too low …"), a filtered
// answer ("Output blocked by content filtering policy") and the rest,
// which only the message tells apart. A rate limit whose message names a
// spend limit is a spent quota. Vertex AI's Claude models and Bedrock's
// Messages API answer in this shape too.
func Classify(status int, body []byte) providers.ErrorClass {
	var msg, typ string
	if jsonlimit.Check(body) == nil {
		msg, typ, _ = ErrorFields(body)
	} else {
		msg = string(body)
	}
	switch typ {
	case "overloaded_error":
		return providers.ErrOverloaded
	case "billing_error":
		return providers.ErrQuotaExhausted
	case "rate_limit_error":
		if providers.ClassifyMessage(msg) == providers.ErrQuotaExhausted {
			return providers.ErrQuotaExhausted
		}
		return providers.ErrRateLimited
	case "request_too_large":
		// Over the request's byte limit, not the context window.
		return providers.ErrInvalidRequest
	}
	return providers.ClassifyFallback(status, msg)
}
