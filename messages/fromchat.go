package messages

import (
	"encoding/json"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Response is a Messages API answer.
type Response struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []OutBlock `json:"content"`
	StopReason   string     `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        Usage      `json:"usage"`
}

// OutBlock is a content block of an answer.
type OutBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Usage is the Messages API usage object.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// UsageOf is the Messages usage of the gateway's: Anthropic's
// input_tokens leaves out the tokens read from and written to the prompt
// cache, which OpenAI's prompt_tokens includes.
func UsageOf(u *providers.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	in := u.PromptTokens - u.CachedTokens - u.CacheWriteTokens
	if in < 0 {
		in = 0
	}
	return Usage{InputTokens: in, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedTokens, CacheCreationInputTokens: u.CacheWriteTokens}
}

// StopReason maps a chat finish_reason to Anthropic's stop_reason.
func StopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// MessageID makes an Anthropic-style id of a chat completion's id.
func MessageID(chatID string) string {
	if strings.HasPrefix(chatID, "msg_") {
		return chatID
	}
	if chatID == "" {
		return oaiwire.NewID("msg_")
	}
	return "msg_" + chatID
}

// chatAnswer is the part of a chat completion FromChat reads.
type chatAnswer struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content          *string            `json:"content"`
			ReasoningContent string             `json:"reasoning_content"`
			Reasoning        string             `json:"reasoning"`
			Refusal          *string            `json:"refusal"`
			ToolCalls        []oaiwire.ToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

// FromChat translates a complete chat completion into a Messages answer
// for a request for model (the client's model when the answer names
// none). The first choice is the answer: Messages has no n.
func FromChat(chat []byte, model string) ([]byte, error) {
	if err := jsonlimit.Object(chat); err != nil {
		return nil, err
	}
	var a chatAnswer
	if err := json.Unmarshal(chat, &a); err != nil {
		return nil, err
	}
	if len(a.Choices) == 0 {
		return nil, errNoChoice
	}
	if a.Model != "" {
		model = a.Model
	}
	ch := &a.Choices[0]
	m := &ch.Message
	resp := Response{ID: MessageID(a.ID), Type: "message", Role: "assistant", Model: model, Content: make([]OutBlock, 0, 1+len(m.ToolCalls))}
	thinking := m.ReasoningContent
	if thinking == "" {
		thinking = m.Reasoning
	}
	if thinking != "" {
		// A chat target's reasoning has no signature to send back; an
		// empty one tells the client so.
		empty := ""
		resp.Content = append(resp.Content, OutBlock{Type: "thinking", Thinking: &thinking, Signature: &empty})
	}
	text := ""
	if m.Content != nil {
		text = *m.Content
	}
	if text == "" && m.Refusal != nil {
		text = *m.Refusal
	}
	if text != "" || len(m.ToolCalls) == 0 {
		resp.Content = append(resp.Content, OutBlock{Type: "text", Text: &text})
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		resp.Content = append(resp.Content, OutBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: ToolInput(tc.Function.Arguments)})
	}
	resp.StopReason = StopReason(ch.FinishReason)
	if m.Refusal != nil && *m.Refusal != "" {
		resp.StopReason = "refusal"
	}
	if u := chatUsage(a.Usage); u != nil {
		resp.Usage = UsageOf(u)
	}
	return marshal(&resp)
}

// ToolInput is a tool call's arguments as the tool_use input object: the
// arguments when they are a JSON object, an empty object when there are
// none, and otherwise the raw text kept under "arguments" so nothing the
// model said is lost.
func ToolInput(args string) json.RawMessage {
	a := strings.TrimSpace(args)
	if a == "" {
		return json.RawMessage("{}")
	}
	if a[0] == '{' && json.Valid([]byte(a)) {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(map[string]string{"arguments": args})
	return b
}

// errNoChoice is the error of a chat answer without a choice.
var errNoChoice = errorString("the provider's answer has no choices")

type errorString string

func (e errorString) Error() string { return string(e) }
