package azure

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/openaicompat"
)

// ClassifyError implements providers.ErrorClassifier.
func (OpenAI) ClassifyError(status int, _ http.Header, body []byte) providers.ErrorClass {
	return classify(status, body)
}

// ClassifyError implements providers.ErrorClassifier.
func (AI) ClassifyError(status int, _ http.Header, body []byte) providers.ErrorClass {
	return classify(status, body)
}

// classify reads Azure's error shapes, which are OpenAI's envelope with
// Azure's own codes: a prompt the content filter refused is a 400 with
// code "content_filter" and innererror.code
// "ResponsibleAIPolicyViolation" (Azure OpenAI; Foundry models say
// "content_filter" alone); a rate limit is a 429 whose code is the string
// "429" ("Requests to the ChatCompletions_Create Operation … have exceeded
// token rate limit …"), which the message's wording classifies. The
// rest reads as OpenAI's (context_length_exceeded
// and friends) through openaicompat.Classify.
func classify(status int, body []byte) providers.ErrorClass {
	if jsonlimit.Check(body) == nil {
		e := gjson.GetBytes(body, "error")
		for _, code := range []string{e.Get("innererror.code").String(), e.Get("code").String()} {
			switch strings.ToLower(code) {
			case "responsibleaipolicyviolation", "content_filter", "contentfilter":
				return providers.ErrContentPolicy
			}
		}
	}
	return openaicompat.Classify(status, body)
}
