package bedrock

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// ClassifyError implements providers.ErrorClassifier.
func (*Provider) ClassifyError(status int, header http.Header, body []byte) providers.ErrorClass {
	return Classify(status, header, body)
}

// Classify reads a Bedrock runtime error: its name in the
// x-amzn-ErrorType header (or a "__type" or "code" member), its text in
// "message". ThrottlingException is a rate limit unless its message
// names a daily allowance ("Too many tokens per day"), which is spent
// until the next day; ServiceQuotaExceededException a spent account
// quota; ModelNotReadyException and ServiceUnavailableException
// overload. A ValidationException is an invalid request whose message
// may say more: the Converse API's "Input is too long for requested
// model.", Claude's "prompt is too long: N tokens > M maximum" (the
// InvokeModel and Messages APIs pass Anthropic's message on), or the
// image models' "This request has been blocked by our content filters."
func Classify(status int, header http.Header, body []byte) providers.ErrorClass {
	var msg, name string
	if header != nil {
		name = header.Get("X-Amzn-Errortype")
	}
	if jsonlimit.Check(body) == nil {
		r := gjson.ParseBytes(body)
		msg = r.Get("message").String()
		if msg == "" {
			msg = r.Get("Message").String()
		}
		if msg == "" {
			// Claude's own envelope, as InvokeModel may pass it on.
			msg = r.Get("error.message").String()
		}
		if name == "" {
			name = r.Get("__type").String()
		}
		if name == "" {
			name = r.Get("code").String()
		}
	} else {
		msg = string(body)
	}
	switch strings.TrimSuffix(strings.ToLower(shortErrorName(name)), "exception") {
	case "throttling":
		if providers.ClassifyMessage(msg) == providers.ErrQuotaExhausted {
			return providers.ErrQuotaExhausted
		}
		return providers.ErrRateLimited
	case "servicequotaexceeded":
		return providers.ErrQuotaExhausted
	case "modelnotready", "serviceunavailable":
		return providers.ErrOverloaded
	}
	return providers.ClassifyFallback(status, msg)
}
