package bedrock

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// newID and now are replaced in tests so golden outputs are stable.
var (
	newID = func() string {
		var b [12]byte
		_, _ = rand.Read(b[:])
		return "chatcmpl-" + hex.EncodeToString(b[:])
	}
	now = time.Now
)

// chatTranslator converts Converse answers to OpenAI chat completions.
type chatTranslator struct{}

// The Converse response (bedrock-runtime API reference, Converse).
type converseResponse struct {
	Output struct {
		Message *struct {
			Role    string       `json:"role"`
			Content []cvOutBlock `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string   `json:"stopReason"`
	Usage      *cvUsage `json:"usage"`
}

type cvOutBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ReasoningContent *struct {
		ReasoningText *struct {
			Text      string `json:"text"`
			Signature string `json:"signature"`
		} `json:"reasoningText"`
	} `json:"reasoningContent"`
}

type cvUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
}

// Response implements providers.Translator.
func (chatTranslator) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	if err := oaiwire.CheckAnswer(Slug, body); err != nil {
		return nil, nil, err
	}
	var r converseResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, err
	}
	if r.Output.Message == nil {
		return nil, nil, errors.New("bedrock: response has no output.message")
	}
	msg := oaiwire.ResponseMessage{Role: "assistant"}
	var text, reasoning strings.Builder
	hasText := false
	for _, b := range r.Output.Message.Content {
		switch {
		case b.Text != nil:
			text.WriteString(*b.Text)
			hasText = true
		case b.ToolUse != nil:
			tc := oaiwire.ToolCall{ID: b.ToolUse.ToolUseID, Type: "function"}
			tc.Function.Name = b.ToolUse.Name
			tc.Function.Arguments = compactJSON(b.ToolUse.Input)
			msg.ToolCalls = append(msg.ToolCalls, tc)
		case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
			reasoning.WriteString(b.ReasoningContent.ReasoningText.Text)
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		s := text.String()
		msg.Content = &s
	}
	msg.ReasoningContent = reasoning.String()
	out := oaiwire.ChatCompletion{
		ID:      newID(),
		Object:  "chat.completion",
		Created: now().Unix(),
		Model:   c.Model,
		Choices: []oaiwire.Choice{{Message: msg, Logprobs: oaiwire.NullJSON, FinishReason: FinishReason(r.StopReason)}},
	}
	var usage *providers.Usage
	if r.Usage != nil {
		usage = convertUsage(r.Usage)
		out.Usage = openAIUsage(usage)
	}
	b, err := json.Marshal(&out)
	return b, usage, err
}

// FinishReason maps a Converse stopReason to OpenAI's finish_reason.
func FinishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	}
	// end_turn, stop_sequence and anything newer.
	return "stop"
}

// convertUsage maps Converse usage. Bedrock counts cached prompt tokens
// apart from inputTokens; OpenAI's prompt_tokens includes them and
// cached_tokens says how many were read from the cache. Cache writes are
// kept apart too, since they are priced above plain input.
func convertUsage(u *cvUsage) *providers.Usage {
	out := &providers.Usage{
		PromptTokens:     u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens,
		CompletionTokens: u.OutputTokens,
		TotalTokens:      u.TotalTokens,
		CachedTokens:     u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheWriteInputTokens,
	}
	if sum := out.PromptTokens + out.CompletionTokens; out.TotalTokens < sum {
		out.TotalTokens = sum
	}
	return out
}

// openAIUsage is the usage object Bedrock answers carry: details only
// when some prompt tokens were read from the cache, and the cache-write
// count under the name the Anthropic translation uses, for clients that
// price cache writes.
func openAIUsage(u *providers.Usage) *oaiwire.UsageOut {
	out := &oaiwire.UsageOut{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens, CacheCreationInputTokens: u.CacheWriteTokens}
	if u.CachedTokens > 0 {
		out.PromptTokensDetails = &oaiwire.PromptDetails{CachedTokens: u.CachedTokens}
	}
	return out
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Error implements providers.Translator.
func (chatTranslator) Error(_ *providers.Call, status int, body []byte) []byte {
	return ErrorBody(status, body)
}

// Stream implements providers.Translator.
func (chatTranslator) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return NewStreamConverter(c, w)
}

// ErrorBody converts a Bedrock error response ({"message": "..."}, the
// error name in the x-amzn-ErrorType header or a "__type" field) to the
// OpenAI envelope, keeping Bedrock's message. The header is not available
// to translators, so the type falls back on the status code.
func ErrorBody(status int, body []byte) []byte {
	msg := gjson.GetBytes(body, "message").String()
	if msg == "" {
		msg = gjson.GetBytes(body, "Message").String()
	}
	if msg == "" && jsonlimit.Check(body) != nil {
		// A proxy's or load balancer's plain-text answer: keep a bounded
		// prefix so the client sees what happened.
		msg = strings.TrimSpace(string(body[:min(len(body), 256)]))
	}
	if msg == "" {
		msg = "bedrock returned " + http.StatusText(status)
	}
	code := gjson.GetBytes(body, "__type").String()
	if code == "" {
		code = gjson.GetBytes(body, "code").String()
	}
	code = shortErrorName(code)
	e := apierror.New(status, errorType(status, code), msg)
	if code != "" {
		e.Code = code
	}
	return e.Body()
}

// shortErrorName strips the namespace and suffix of an AWS error name:
// "com.amazon.coral#ThrottlingException:http://..." → "ThrottlingException".
func shortErrorName(s string) string {
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return s
}

// errorType picks the OpenAI error type for a Bedrock error name (from a
// stream exception or a body) or, failing that, its status.
func errorType(status int, name string) string {
	switch strings.TrimSuffix(strings.ToLower(name), "exception") {
	case "throttling", "servicequotaexceeded":
		return apierror.TypeRateLimit
	case "validation", "modelnotready":
		return apierror.TypeInvalidRequest
	case "accessdenied", "unrecognizedclient", "invalidsignature", "expiredtoken":
		return apierror.TypeAuthentication
	case "resourcenotfound":
		return apierror.TypeNotFound
	case "modeltimeout":
		return apierror.TypeTimeout
	case "serviceunavailable":
		return apierror.TypeUnavailable
	case "internalserver":
		return apierror.TypeServer
	case "modelstreamerror", "modelerror":
		return apierror.TypeUpstream
	}
	switch {
	case status == http.StatusTooManyRequests:
		return apierror.TypeRateLimit
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return apierror.TypeAuthentication
	case status == http.StatusNotFound:
		return apierror.TypeNotFound
	case status == http.StatusRequestTimeout:
		return apierror.TypeTimeout
	case status == http.StatusServiceUnavailable:
		return apierror.TypeUnavailable
	case status >= 500:
		return apierror.TypeServer
	case status == http.StatusFailedDependency:
		return apierror.TypeUpstream
	}
	return apierror.TypeInvalidRequest
}
