package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Chat translates Messages API answers to OpenAI chat completions. It is
// used by the anthropic provider and by vertex-ai for Claude models.
type Chat struct {
	// Provider is the slug named in responses and error messages.
	Provider string
}

type response struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Model      string      `json:"model"`
	Content    []respBlock `json:"content"`
	StopReason string      `json:"stop_reason"`
	Usage      usage       `json:"usage"`
}

type respBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

// usage is the Messages API usage object.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// gateway returns the gateway's usage: OpenAI counts cached and
// cache-written tokens as prompt tokens, Anthropic reports them apart;
// both are kept apart too, since each has its own price.
func (u *usage) gateway() *providers.Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	return &providers.Usage{
		PromptTokens:     prompt,
		CompletionTokens: u.OutputTokens,
		TotalTokens:      prompt + u.OutputTokens,
		CachedTokens:     u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

// openai returns OpenAI's usage object with Anthropic's cache counts.
func (u *usage) openai() *oaiwire.UsageOut {
	out := oaiwire.UsageFrom(u.gateway())
	out.CacheReadInputTokens = u.CacheReadInputTokens
	out.CacheCreationInputTokens = u.CacheCreationInputTokens
	return out
}

// outBlock is a content block echoed to the client in content_blocks.
type outBlock struct {
	Type      string  `json:"type"`
	Text      *string `json:"text,omitempty"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}

// FinishReason maps a Messages API stop_reason to OpenAI's finish_reason.
func FinishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

// Response implements providers.Translator.
func (t Chat) Response(c *providers.Call, body []byte) ([]byte, *providers.Usage, error) {
	if err := checkMessage(t.Provider, body); err != nil {
		return nil, nil, err
	}
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, nil, err
	}
	msg := oaiwire.ResponseMessage{Role: "assistant"}
	var text, reasoning strings.Builder
	var blocks []outBlock
	thinking := false
	for i := range r.Content {
		b := &r.Content[i]
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			blocks = append(blocks, outBlock{Type: "text", Text: &b.Text})
		case "thinking":
			thinking = true
			reasoning.WriteString(b.Thinking)
			blocks = append(blocks, outBlock{Type: "thinking", Thinking: &b.Thinking, Signature: &b.Signature})
		case "redacted_thinking":
			thinking = true
			blocks = append(blocks, outBlock{Type: "redacted_thinking", Data: b.Data})
		case "tool_use":
			args := string(bytes.TrimSpace(b.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			var tc oaiwire.ToolCall
			tc.ID, tc.Type = b.ID, "function"
			tc.Function.Name, tc.Function.Arguments = b.Name, args
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content = oaiwire.StrPtr(text.String())
	}
	msg.ReasoningContent = reasoning.String()
	if thinking {
		// The blocks carry the signatures a client must send back.
		msg.ContentBlocks = blocks
	}
	model := r.Model
	if model == "" {
		model = c.Model
	}
	id := r.ID
	if id == "" {
		id = oaiwire.NewID("chatcmpl-")
	}
	out := oaiwire.ChatCompletion{
		ID:       id,
		Object:   "chat.completion",
		Created:  time.Now().Unix(),
		Model:    model,
		Provider: t.Provider,
		Choices: []oaiwire.Choice{{
			Message:      msg,
			Logprobs:     oaiwire.NullJSON,
			FinishReason: FinishReason(r.StopReason),
		}},
		Usage: r.Usage.openai(),
	}
	b, err := json.Marshal(&out)
	return b, r.Usage.gateway(), err
}

// ErrorFields reads the message and type of a Messages API error body
// ({"type":"error","error":{"type","message"}}), also accepting Google's
// envelope, which Vertex AI uses in front of Claude.
func ErrorFields(body []byte) (message, typ string, code any) {
	r := gjson.ParseBytes(body)
	if r.IsArray() {
		r = r.Get("0")
	}
	e := r.Get("error")
	if !e.Exists() {
		return r.Get("message").String(), "", nil
	}
	if e.Type == gjson.String {
		return e.String(), "", nil
	}
	message, typ = e.Get("message").String(), e.Get("type").String()
	if s := e.Get("status"); s.Exists() {
		code = s.String()
	}
	return message, typ, code
}

// Error implements providers.Translator.
func (t Chat) Error(c *providers.Call, status int, body []byte) []byte {
	msg, typ, code := ErrorFields(body)
	return oaiwire.ErrorBody(t.Provider, status, msg, typ, code, body)
}

// Stream implements providers.Translator.
func (t Chat) Stream(c *providers.Call, w io.Writer) providers.StreamConverter {
	return newStream(t.Provider, c, w)
}

// checkMessage requires what every Messages API answer carries: an object
// of "type":"message" with a content array.
func checkMessage(provider string, body []byte) error {
	if provider == "" {
		provider = Slug
	}
	if err := oaiwire.CheckAnswer(provider, body); err != nil {
		return err
	}
	if gjson.GetBytes(body, "type").Str != "message" {
		return oaiwire.MissingField(provider, `"type":"message"`)
	}
	if !gjson.GetBytes(body, "content").IsArray() {
		return oaiwire.MissingField(provider, "content")
	}
	return nil
}
