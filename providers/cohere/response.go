package cohere

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// chat translates v2 chat answers to OpenAI chat completions.
type chat struct{}

type response struct {
	ID           string `json:"id"`
	FinishReason string `json:"finish_reason"`
	Message      struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"content"`
		ToolPlan  string     `json:"tool_plan"`
		ToolCalls []toolCall `json:"tool_calls"`
	} `json:"message"`
	Usage usage `json:"usage"`
}

// usage is Cohere's usage object. billed_units are what the account is
// charged; tokens include Cohere's own prompt template.
type usage struct {
	BilledUnits *tokenCounts `json:"billed_units"`
	Tokens      *tokenCounts `json:"tokens"`
	// CachedTokens is reported by newer models.
	CachedTokens int64 `json:"cached_tokens"`
}

type tokenCounts struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// gateway returns the usage the gateway accounts: billed units when
// reported (what OpenAI's prompt_tokens mean), else raw tokens.
func (u *usage) gateway() *providers.Usage {
	tc := u.BilledUnits
	if tc == nil || (tc.InputTokens == 0 && tc.OutputTokens == 0) {
		tc = u.Tokens
	}
	if tc == nil {
		tc = &tokenCounts{}
	}
	return &providers.Usage{
		PromptTokens:     tc.InputTokens,
		CompletionTokens: tc.OutputTokens,
		TotalTokens:      tc.InputTokens + tc.OutputTokens,
		// cached_tokens counts raw tokens; never claim more cached
		// tokens than the prompt tokens reported beside them.
		CachedTokens: min(u.CachedTokens, tc.InputTokens),
	}
}

// FinishReason maps Cohere's finish_reason to OpenAI's.
func FinishReason(r string) string {
	switch r {
	case "MAX_TOKENS":
		return "length"
	case "TOOL_CALL":
		return "tool_calls"
	}
	return "stop" // COMPLETE, STOP_SEQUENCE, ERROR, TIMEOUT
}

// Response implements providers.Translator.
func (chat) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	if err := oaiwire.CheckAnswer(Slug, body); err != nil {
		return nil, nil, err
	}
	if !gjson.GetBytes(body, "message").IsObject() {
		return nil, nil, oaiwire.MissingField(Slug, "message")
	}
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, err
	}
	msg := oaiwire.ResponseMessage{Role: "assistant"}
	var text, reasoning strings.Builder
	for _, p := range r.Message.Content {
		switch p.Type {
		case "text":
			text.WriteString(p.Text)
		case "thinking":
			reasoning.WriteString(p.Thinking)
		}
	}
	for _, tc := range r.Message.ToolCalls {
		var oc oaiwire.ToolCall
		oc.ID, oc.Type = tc.ID, "function"
		oc.Function.Name, oc.Function.Arguments = tc.Function.Name, tc.Function.Arguments
		msg.ToolCalls = append(msg.ToolCalls, oc)
	}
	if text.Len() == 0 && r.Message.ToolPlan != "" {
		// The tool plan is the text a Cohere model writes before calling
		// tools; it comes back as the assistant's content.
		text.WriteString(r.Message.ToolPlan)
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content = oaiwire.StrPtr(text.String())
	}
	msg.ReasoningContent = reasoning.String()
	id := r.ID
	if id == "" {
		id = oaiwire.NewID("chatcmpl-")
	}
	u := r.Usage.gateway()
	out := oaiwire.ChatCompletion{
		ID:       id,
		Object:   "chat.completion",
		Created:  time.Now().Unix(),
		Model:    c.Model,
		Provider: Slug,
		Choices:  []oaiwire.Choice{{Message: msg, Logprobs: oaiwire.NullJSON, FinishReason: FinishReason(r.FinishReason)}},
		Usage:    oaiwire.UsageFrom(u),
	}
	b, err := json.Marshal(&out)
	return b, u, err
}

// errorMessage reads a Cohere error body ({"id","message"}).
func errorMessage(body []byte) string {
	r := gjson.ParseBytes(body)
	if m := r.Get("message"); m.Type == gjson.String {
		return m.Str
	}
	if m := r.Get("error.message"); m.Type == gjson.String {
		return m.Str
	}
	return r.Get("error").String()
}

// Error implements providers.Translator.
func (chat) Error(c *providers.Call, status int, body []byte) []byte {
	return oaiwire.ErrorBody(Slug, status, errorMessage(body), "", nil, body)
}

// Stream implements providers.Translator.
func (chat) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return newStream(c, w)
}
