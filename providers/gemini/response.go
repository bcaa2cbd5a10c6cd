package gemini

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Chat translates Gemini generateContent answers to OpenAI chat
// completions, for the google and vertex-ai providers.
type Chat struct {
	// Provider is the slug named in responses and error messages.
	Provider string
}

type response struct {
	Candidates     []candidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *usageMetadata `json:"usageMetadata"`
	ModelVersion  string         `json:"modelVersion"`
	ResponseID    string         `json:"responseId"`
}

type candidate struct {
	Content struct {
		Parts []respPart `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
	Index        int    `json:"index"`
}

type respPart struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought"`
	ThoughtSignature string `json:"thoughtSignature"`
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

// usageMetadata is Gemini's usage object.
type usageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
}

// gateway converts to the gateway's usage. OpenAI counts reasoning in
// completion tokens; Gemini reports thoughts apart from candidates.
func (u *usageMetadata) gateway() *providers.Usage {
	prompt := u.PromptTokenCount + u.ToolUsePromptTokenCount
	completion := u.CandidatesTokenCount + u.ThoughtsTokenCount
	total := u.TotalTokenCount
	if total == 0 {
		total = prompt + completion
	}
	return &providers.Usage{
		PromptTokens:     prompt,
		CompletionTokens: completion,
		TotalTokens:      total,
		CachedTokens:     u.CachedContentTokenCount,
		ReasoningTokens:  u.ThoughtsTokenCount,
	}
}

// FinishReason maps Gemini's finishReason to OpenAI's; toolCalls is true
// when the candidate called functions.
func FinishReason(reason string, toolCalls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE":
		return "content_filter"
	}
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

// callID is the id given to a function call Gemini sent without one.
func callID(n int) string { return "call_" + strconv.Itoa(n) }

// signatureExtra is a tool call's extra_content carrying Gemini's thought
// signature, which must come back with the call on the next turn.
func signatureExtra(sigRaw string) string {
	return `{"google":{"thought_signature":` + sigRaw + `}}`
}

// Response implements providers.Translator.
func (t Chat) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	provider := t.Provider
	if provider == "" {
		provider = Slug
	}
	if err := oaiwire.CheckAnswer(provider, body); err != nil {
		return nil, nil, err
	}
	// A blocked prompt has no candidates but promptFeedback; an answer
	// with neither is not a generateContent answer.
	if !gjson.GetBytes(body, "candidates").IsArray() && !gjson.GetBytes(body, "promptFeedback").IsObject() {
		return nil, nil, oaiwire.MissingField(provider, "candidates")
	}
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, err
	}
	out := oaiwire.ChatCompletion{
		ID:       r.ResponseID,
		Object:   "chat.completion",
		Created:  time.Now().Unix(),
		Model:    r.ModelVersion,
		Provider: t.Provider,
		Choices:  make([]oaiwire.Choice, 0, max(1, len(r.Candidates))),
	}
	if out.ID == "" {
		out.ID = oaiwire.NewID("chatcmpl-")
	}
	if out.Model == "" {
		out.Model = c.Model
	}
	calls := 0
	for i := range r.Candidates {
		out.Choices = append(out.Choices, convertCandidate(&r.Candidates[i], &calls))
	}
	if len(r.Candidates) == 0 {
		// A blocked prompt has no candidates, only promptFeedback.
		reason := "stop"
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			reason = "content_filter"
		}
		out.Choices = append(out.Choices, oaiwire.Choice{
			Message:      oaiwire.ResponseMessage{Role: "assistant", Content: oaiwire.StrPtr("")},
			Logprobs:     oaiwire.NullJSON,
			FinishReason: reason,
		})
	}
	var u *providers.Usage
	if r.UsageMetadata != nil {
		u = r.UsageMetadata.gateway()
	} else {
		u = &providers.Usage{}
	}
	out.Usage = oaiwire.UsageFrom(u)
	b, err := json.Marshal(&out)
	return b, u, err
}

func convertCandidate(cd *candidate, calls *int) oaiwire.Choice {
	msg := oaiwire.ResponseMessage{Role: "assistant"}
	var text, reasoning strings.Builder
	for i := range cd.Content.Parts {
		p := &cd.Content.Parts[i]
		switch {
		case p.FunctionCall != nil:
			var tc oaiwire.ToolCall
			tc.ID, tc.Type = p.FunctionCall.ID, "function"
			if tc.ID == "" {
				tc.ID = callID(*calls)
			}
			*calls++
			tc.Function.Name = p.FunctionCall.Name
			tc.Function.Arguments = compactArgs(p.FunctionCall.Args)
			if p.ThoughtSignature != "" {
				tc.ExtraContent = &oaiwire.ExtraContent{Google: &oaiwire.GoogleExtra{ThoughtSignature: p.ThoughtSignature}}
			}
			msg.ToolCalls = append(msg.ToolCalls, tc)
		case p.Thought:
			reasoning.WriteString(p.Text)
		default:
			text.WriteString(p.Text)
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content = oaiwire.StrPtr(text.String())
	}
	msg.ReasoningContent = reasoning.String()
	return oaiwire.Choice{
		Index:        cd.Index,
		Message:      msg,
		Logprobs:     oaiwire.NullJSON,
		FinishReason: FinishReason(cd.FinishReason, len(msg.ToolCalls) > 0),
	}
}

// compactArgs returns function call arguments as the JSON text OpenAI
// puts in a string; absent args are an empty object.
func compactArgs(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	return string(raw)
}

// ErrorFields reads message, status and code of a Google API error body
// ({"error":{"code","message","status"}}, possibly inside an array).
func ErrorFields(body []byte) (message string, code any) {
	r := gjson.ParseBytes(body)
	if r.IsArray() {
		r = r.Get("0")
	}
	e := r.Get("error")
	if !e.Exists() {
		return r.Get("message").String(), nil
	}
	if e.Type == gjson.String {
		return e.String(), nil
	}
	if s := e.Get("status").String(); s != "" {
		code = s
	}
	return e.Get("message").String(), code
}

// Error implements providers.Translator.
func (t Chat) Error(c *providers.Call, status int, body []byte) []byte {
	msg, code := ErrorFields(body)
	return oaiwire.ErrorBody(t.Provider, status, msg, "", code, body)
}

// Stream implements providers.Translator.
func (t Chat) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return newStream(t.Provider, c, w)
}
