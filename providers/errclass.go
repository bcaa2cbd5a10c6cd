package providers

import (
	"net/http"
	"strings"
)

// ErrorClass is what kind of failure a provider's error answer reports,
// the same words whatever the provider: strategies fall back on classes
// (strategy.on_error_types), the access log records the class
// (error_type), and the client reads it in the x-gateway-error-type
// header. The empty class is "none of these": an authentication error, a
// missing model, a server fault.
type ErrorClass string

// Error classes.
const (
	// ErrContextLength: the prompt (or prompt plus the output asked for)
	// does not fit the model's context window. Another model may fit it.
	ErrContextLength ErrorClass = "context_length_exceeded"
	// ErrContentPolicy: the provider's safety system refused the prompt
	// or the answer.
	ErrContentPolicy ErrorClass = "content_policy"
	// ErrRateLimited: a per-minute (or per-second) limit was hit; the
	// same call succeeds later.
	ErrRateLimited ErrorClass = "rate_limited"
	// ErrQuotaExhausted: the account's credit, billing quota or daily or
	// monthly allowance is spent; waiting minutes does not help.
	ErrQuotaExhausted ErrorClass = "quota_exhausted"
	// ErrOverloaded: the provider is overloaded or the model is not
	// ready (503, Anthropic's 529, a loading local server).
	ErrOverloaded ErrorClass = "overloaded"
	// ErrInvalidRequest: any other refusal of the request as written
	// (a 400 or 422 that none of the classes above explains).
	ErrInvalidRequest ErrorClass = "invalid_request"
)

// ErrorClasses lists every class, in the order the docs give them; the
// configuration schema's enum for on_error_types is the same list.
var ErrorClasses = []ErrorClass{
	ErrContextLength, ErrContentPolicy, ErrRateLimited, ErrQuotaExhausted, ErrOverloaded, ErrInvalidRequest,
}

// Retryable reports whether the same call, sent again to the same
// target, can succeed: a rate limit, an overload, or an answer of no
// class (a server fault). A spent quota, a prompt that does not fit, a
// refused prompt and a malformed request fail alike on every try, so
// retrying them only spends time and the provider's patience (a
// quota_exhausted 429 retried three times is three more refusals).
func (c ErrorClass) Retryable() bool {
	switch c {
	case ErrQuotaExhausted, ErrContextLength, ErrContentPolicy, ErrInvalidRequest:
		return false
	}
	return true
}

// ErrorClassifier is implemented by every provider family: it reads the
// provider's own error shapes (its codes, types and messages) and names
// the class of a non-2xx answer. body is the raw answer as the provider
// sent it (at most the gateway's error buffer), header its headers. It
// returns "" when the answer fits no class.
type ErrorClassifier interface {
	ClassifyError(status int, header http.Header, body []byte) ErrorClass
}

// Classify names the class of a provider's error answer with p's own
// classifier, or, for a provider without one, from the message phrases
// and the status alone (ClassifyMessage, ClassifyStatus).
func Classify(p Provider, status int, header http.Header, body []byte) ErrorClass {
	if status >= 200 && status < 300 {
		return ""
	}
	if c, ok := p.(ErrorClassifier); ok {
		return c.ClassifyError(status, header, body)
	}
	if c := ClassifyMessage(string(body)); c != "" {
		return c
	}
	return ClassifyStatus(status)
}

// Phrases of error messages, lower case, that name a class whatever the
// provider's codes say (or when it sends none). They are the wordings of
// OpenAI, Azure, Anthropic, Bedrock, Gemini/Vertex, Cohere, Mistral, Groq
// and the vLLM, SGLang and llama.cpp servers; see each provider's
// ClassifyError for the shapes they come in.
var (
	contextPhrases = []string{
		"maximum context length",               // OpenAI, Azure, vLLM, Mistral
		"context_length_exceeded",              // OpenAI's code quoted in a message
		"context length",                       // SGLang, Together ("longer than the model's context length")
		"context window",                       // several
		"context size",                         // llama.cpp ("exceeds the available context size")
		"prompt is too long",                   // Anthropic (and Claude on Bedrock and Vertex)
		"input is too long",                    // Bedrock Converse
		"too many input tokens",                // Bedrock
		"too many tokens: ",                    // Cohere ("too many tokens: total number of tokens…")
		"exceeds the maximum number of tokens", // Gemini ("The input token count (N) exceeds…")
		"reduce the length of the messages",    // OpenAI, Groq
		"maximum prompt length",                // xAI
		"input token count",                    // Gemini
	}
	policyPhrases = []string{
		"content management policy",      // Azure
		"content_policy_violation",       // OpenAI's code quoted
		"content filtering policy",       // Anthropic ("Output blocked by content filtering policy")
		"safety system",                  // OpenAI ("rejected as a result of our safety system")
		"blocked by our content filters", // Bedrock (Titan, Nova)
		"responsibleaipolicyviolation",   // Azure's inner code quoted
		"usage guidelines",               // Cohere
		"prohibited content",             // Gemini
	}
	quotaPhrases = []string{
		"insufficient_quota",          // OpenAI's code quoted
		"exceeded your current quota", // OpenAI, Gemini
		"credit balance",              // Anthropic
		"billing",                     // OpenAI, Gemini ("check your plan and billing details")
		"per day",                     // Bedrock ("Too many tokens per day"), Gemini quota ids
		"perday",                      // Gemini quota ids ("GenerateRequestsPerDayPerProjectPerModel")
		"per month", "/ month",        // Cohere trial keys ("1,000 API calls / month")
		"spend limit", // Anthropic ("enforced_spend_limit_reached")
		"spend_limit",
	}
	overloadPhrases = []string{
		"overloaded",         // OpenAI, Anthropic, Gemini ("The model is overloaded")
		"loading model",      // llama.cpp
		"model is not ready", // Bedrock
		"high demand",        // Azure
	}
	ratePhrases = []string{
		"rate limit", "rate_limit", "too many requests", "throttl",
	}
)

// ClassifyMessage names the class an error message's wording says, or
// "". Context length and content policy are tried first, then quota
// (whose messages also say "limit"), overload and rate limits.
func ClassifyMessage(msg string) ErrorClass {
	if msg == "" {
		return ""
	}
	m := strings.ToLower(msg)
	for _, set := range phraseSets {
		for _, p := range set.phrases {
			if strings.Contains(m, p) {
				return set.class
			}
		}
	}
	return ""
}

var phraseSets = []struct {
	class   ErrorClass
	phrases []string
}{
	{ErrContextLength, contextPhrases},
	{ErrContentPolicy, policyPhrases},
	{ErrQuotaExhausted, quotaPhrases},
	{ErrOverloaded, overloadPhrases},
	{ErrRateLimited, ratePhrases},
}

// ClassifyStatus is the class a status alone implies, when the answer
// says nothing more specific: 429 rate limited, 402 quota exhausted, 503
// and 529 overloaded, 400, 413 and 422 an invalid request; "" otherwise.
func ClassifyStatus(status int) ErrorClass {
	switch status {
	case http.StatusTooManyRequests:
		return ErrRateLimited
	case http.StatusPaymentRequired:
		return ErrQuotaExhausted
	case http.StatusServiceUnavailable, 529:
		return ErrOverloaded
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return ErrInvalidRequest
	}
	return ""
}

// ClassifyFallback is the last step of every provider's classifier: the
// message's wording, else the status; a rate-limit status whose message
// names a spent quota is quota exhaustion.
func ClassifyFallback(status int, msg string) ErrorClass {
	if c := ClassifyMessage(msg); c != "" {
		if c == ErrRateLimited && status != http.StatusTooManyRequests && status < 500 && status != 0 {
			// "rate" in a 400's message (a parameter named rate) is not a
			// rate limit.
			return ClassifyStatus(status)
		}
		return c
	}
	return ClassifyStatus(status)
}
