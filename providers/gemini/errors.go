package gemini

import (
	"bytes"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// ClassifyError implements providers.ErrorClassifier.
func (provider) ClassifyError(status int, _ http.Header, body []byte) providers.ErrorClass {
	return Classify(status, body)
}

// Classify reads a Google API error ({"error":{"code","message","status",
// "details"}}, possibly inside an array), which the Gemini API and Gemini
// models on Vertex AI send. RESOURCE_EXHAUSTED (429) is a rate limit,
// unless the quota that ran out is a daily one (a quotaId such as
// "GenerateRequestsPerDayPerProjectPerModel-FreeTier", Vertex's
// "…_per_day"): its message ("You exceeded your current quota, please
// check your plan and billing details") is the same for per-minute
// limits, so only the quota's name tells them apart. UNAVAILABLE (503,
// "The model is overloaded") is overload. An INVALID_ARGUMENT whose
// message says the input is too long ("The input token count (N) exceeds
// the maximum number of tokens allowed (M)") is a context-length error.
// Gemini reports a blocked prompt or answer in a 200 answer
// (promptFeedback.blockReason, finishReason SAFETY), not as an error; an
// error message naming prohibited content is a content-policy error.
func Classify(status int, body []byte) providers.ErrorClass {
	var msg, state string
	if jsonlimit.Check(body) == nil {
		var code any
		msg, code = ErrorFields(body)
		state, _ = code.(string)
	} else {
		msg = string(body)
	}
	switch state {
	case "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND":
		return ""
	case "RESOURCE_EXHAUSTED":
		if dailyQuota(body) {
			return providers.ErrQuotaExhausted
		}
		return providers.ErrRateLimited
	case "UNAVAILABLE":
		return providers.ErrOverloaded
	}
	if bytes.Contains(body, []byte("API_KEY_INVALID")) {
		// Google answers a bad key with a 400 INVALID_ARGUMENT: an
		// authentication failure, not a refusal of the request.
		return ""
	}
	return providers.ClassifyFallback(status, msg)
}

// dailyQuota reports whether a RESOURCE_EXHAUSTED body names a daily
// quota, in the Gemini API's quota ids or Vertex AI's metric names.
func dailyQuota(body []byte) bool {
	b := bytes.ToLower(body)
	return bytes.Contains(b, []byte("perday")) || bytes.Contains(b, []byte("per_day")) || bytes.Contains(b, []byte("per day"))
}
