package cohere

import (
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// ClassifyError implements providers.ErrorClassifier. Cohere's errors
// ({"id","message"}) carry no code, so the status and the message say
// it all: a 400 "too many tokens: total number of tokens in the prompt
// cannot exceed 4081 - received 4590 …" is a context-length error; a 429
// is a rate limit ("You are past the per minute request limit", "You are
// using a Trial key, which is limited to 20 API calls / minute") unless
// it names the trial key's monthly allowance ("1000 API calls / month"),
// which is a spent quota, as is a 402; a refusal under Cohere's usage
// guidelines is a content-policy error.
func (provider) ClassifyError(status int, _ http.Header, body []byte) providers.ErrorClass {
	msg := string(body)
	if jsonlimit.Check(body) == nil {
		msg = errorMessage(body)
	}
	return providers.ClassifyFallback(status, msg)
}
