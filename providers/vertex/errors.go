package vertex

import (
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
)

// ClassifyError implements providers.ErrorClassifier. Vertex AI answers
// in two shapes: Claude models' errors come in Anthropic's
// ({"type":"error","error":{"type","message"}}), everything else, and
// Vertex's own refusals in front of Claude (a RESOURCE_EXHAUSTED quota),
// in Google's ({"error":{"code","message","status"}}). The body's shape
// picks the reading, since the same model can answer in either.
func (*provider) ClassifyError(status int, _ http.Header, body []byte) providers.ErrorClass {
	if jsonlimit.Check(body) == nil && gjson.GetBytes(body, "type").Str == "error" {
		return anthropic.Classify(status, body)
	}
	return gemini.Classify(status, body)
}
