package openaicompat

import (
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// codeClasses maps the error codes and types of OpenAI and of the servers
// that copy its envelope (vLLM, SGLang, llama.cpp, Ollama, Groq,
// Together, …) to classes. OpenAI names the kind in code
// ("context_length_exceeded", "insufficient_quota") and sometimes in type
// ("insufficient_quota"); llama.cpp in type ("exceed_context_size_error",
// "unavailable_error"); vLLM and SGLang only in the message
// ("BadRequestError" says nothing), which ClassifyFallback reads.
var codeClasses = map[string]providers.ErrorClass{
	"context_length_exceeded":    providers.ErrContextLength,
	"exceed_context_size_error":  providers.ErrContextLength,
	"content_policy_violation":   providers.ErrContentPolicy,
	"content_filter":             providers.ErrContentPolicy,
	"moderation_blocked":         providers.ErrContentPolicy,
	"insufficient_quota":         providers.ErrQuotaExhausted,
	"billing_hard_limit_reached": providers.ErrQuotaExhausted,
	"billing_not_active":         providers.ErrQuotaExhausted,
	"rate_limit_exceeded":        providers.ErrRateLimited,
	"server_is_overloaded":       providers.ErrOverloaded,
	"engine_overloaded":          providers.ErrOverloaded,
	"unavailable_error":          providers.ErrOverloaded,
}

// ClassifyError implements providers.ErrorClassifier for OpenAI and every
// provider of the table (the openai-compatible row is how vLLM, SGLang
// and llama.cpp servers are reached).
func (p *compat) ClassifyError(status int, _ http.Header, body []byte) providers.ErrorClass {
	return Classify(status, body)
}

// Classify reads an error in OpenAI's envelope ({"error":{"message",
// "type","code","param"}}), vLLM's and SGLang's flat one ({"object":
// "error","message","type":"BadRequestError","code":400}), llama.cpp's
// ({"error":{"code":400,"type":"exceed_context_size_error",…}}) or
// Ollama's ({"error":"…"}): the code or type when it names a class, else
// the message's wording, else the status. Azure's classifier uses it
// after its own codes.
func Classify(status int, body []byte) providers.ErrorClass {
	msg, code, typ := Fields(body)
	if c, ok := codeClasses[code]; ok {
		return c
	}
	if c, ok := codeClasses[typ]; ok {
		return c
	}
	if status == http.StatusTooManyRequests && (typ == "tokens" || typ == "requests") {
		// OpenAI's rate limits name the limit in type ("tokens",
		// "requests"); a spent quota would have said insufficient_quota.
		return providers.ErrRateLimited
	}
	return providers.ClassifyFallback(status, msg)
}

// Fields returns the message, code and type of an OpenAI-style error
// body; a numeric code (vLLM's 400) is not a code name and reads as "".
// A body that is not JSON is its own message.
func Fields(body []byte) (msg, code, typ string) {
	if jsonlimit.Check(body) != nil {
		return string(body), "", ""
	}
	r := gjson.ParseBytes(body)
	e := r.Get("error")
	switch {
	case e.Type == gjson.String:
		return e.Str, "", ""
	case e.IsObject():
		r = e
	}
	msg = r.Get("message").String()
	if c := r.Get("code"); c.Type == gjson.String {
		code = c.Str
	}
	if t := r.Get("type"); t.Type == gjson.String {
		typ = t.Str
	}
	return msg, code, typ
}
