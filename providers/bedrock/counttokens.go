package bedrock

import (
	"encoding/base64"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/messages"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
)

// The Messages API's count_tokens on Bedrock is its CountTokens action,
// POST /model/{modelId}/count-tokens, whose body wraps the InvokeModel
// body the Messages call would have had, base64-encoded:
//
//	{"input":{"invokeModel":{"body":"<base64 of the InvokeModel body>"}}}
//
// and whose answer is {"inputTokens":N}, given to the client as
// Anthropic's {"input_tokens":N}. CountTokens takes foundation model ids
// only: a cross-region inference profile id (us.anthropic.claude-…) is
// counted as the model it routes to.

// countBodyMaxTokens is the max_tokens put in a counted InvokeModel body
// that has none: Claude's InvokeModel body requires it, count_tokens
// requests do not carry it, and it does not change the input count.
const countBodyMaxTokens = 1

// countTokensRequest returns the CountTokens body of a count_tokens call.
func countTokensRequest(c *providers.Call) ([]byte, error) {
	body, err := messagesRequest(c)
	if err != nil {
		return nil, err
	}
	if !gjson.GetBytes(body, "max_tokens").Exists() {
		if body, err = sjson.SetBytes(body, "max_tokens", countBodyMaxTokens); err != nil {
			return nil, apierror.BadRequest("", "the request body could not be prepared for bedrock")
		}
	}
	enc := base64.StdEncoding
	out := make([]byte, 0, enc.EncodedLen(len(body))+48)
	out = append(out, `{"input":{"invokeModel":{"body":"`...)
	out = enc.AppendEncode(out, body)
	return append(out, `"}}}`...), nil
}

// foundationModel is the foundation model id of a cross-region inference
// profile id ("us.anthropic.claude-…", "global.anthropic.claude-…"):
// CountTokens refuses profile ids. Other ids and ARNs are kept.
func foundationModel(model string) string {
	geo, rest, ok := strings.Cut(model, ".")
	if !ok || !strings.HasPrefix(rest, "anthropic.") || len(geo) > 8 {
		return model
	}
	for i := 0; i < len(geo); i++ {
		if c := geo[i]; (c < 'a' || c > 'z') && c != '-' {
			return model
		}
	}
	return rest
}

// countTranslator turns CountTokens answers into Anthropic's count_tokens
// answer; they bill nothing.
type countTranslator struct{}

// Response implements providers.Translator.
func (countTranslator) Response(_ *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	n := gjson.GetBytes(body, "inputTokens")
	if jsonlimit.Object(body) != nil || n.Type != gjson.Number {
		return nil, nil, oaiwire.MissingField(Slug, "inputTokens")
	}
	out := make([]byte, 0, 32)
	out = append(out, `{"input_tokens":`...)
	out = strconv.AppendInt(out, n.Int(), 10)
	return append(out, '}'), nil, nil
}

// Error implements providers.Translator: AWS's {"message":…} in
// Anthropic's shape.
func (countTranslator) Error(_ *providers.Call, status int, body []byte) []byte {
	return messages.Reshape(status, body)
}

// Stream implements providers.Translator; count_tokens never streams.
func (countTranslator) Stream(_ *providers.Call, w io.Writer) providers.StreamConverter {
	return anthropic.NewNativeStream(w)
}
