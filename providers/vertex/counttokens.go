package vertex

import (
	"io"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
)

// countTokens reads either count Vertex AI answers a count_tokens call
// with: Claude's count-tokens:rawPredict, {"input_tokens":N}, passed as it
// is, or a Gemini model's countTokens, {"totalTokens":N}, answered as
// {"input_tokens":N}. The translator is chosen by operation alone (not
// by model), so it tells them apart by the answer.
type countTokens struct{}

var geminiCount = gemini.CountTokens{Provider: Slug}

// Response implements providers.Translator.
func (countTokens) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	if gjson.GetBytes(body, "totalTokens").Exists() && !gjson.GetBytes(body, "input_tokens").Exists() {
		return geminiCount.Response(c, body)
	}
	return claudeCount.Response(c, body)
}

// Error implements providers.Translator.
func (countTokens) Error(c *providers.Call, status int, body []byte) []byte {
	return claudeCount.Error(c, status, body)
}

// Stream implements providers.Translator; count_tokens never streams.
func (countTokens) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return claudeCount.Stream(c, w)
}
