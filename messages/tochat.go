package messages

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// chatRequest is the chat completion ToChat writes; absent optional
// members are omitted, since strict OpenAI-compatible servers refuse
// unknown or null ones.
type chatRequest struct {
	Model             string                 `json:"model"`
	Messages          []chatMessage          `json:"messages"`
	MaxTokens         *int64                 `json:"max_tokens,omitempty"`
	Temperature       *float64               `json:"temperature,omitempty"`
	TopP              *float64               `json:"top_p,omitempty"`
	Stop              []string               `json:"stop,omitempty"`
	Stream            bool                   `json:"stream,omitempty"`
	StreamOptions     *oaiwire.StreamOptions `json:"stream_options,omitempty"`
	Tools             []oaiwire.Tool         `json:"tools,omitempty"`
	ToolChoice        any                    `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool                  `json:"parallel_tool_calls,omitempty"`
	User              string                 `json:"user,omitempty"`
	ReasoningEffort   string                 `json:"reasoning_effort,omitempty"`
}

// chatMessage is one chat message: Content is a string, a part list, or
// nil (an assistant turn of tool calls only).
type chatMessage struct {
	Role       string             `json:"role"`
	Content    any                `json:"content"`
	ToolCalls  []oaiwire.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
}

type namedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// unsupported is the 400 of a request a translated target cannot serve.
func unsupported(field, what string) *apierror.Error {
	return apierror.BadRequest(field, "%s has no counterpart in the chat completions API the target speaks; send it to an Anthropic, Bedrock or Vertex AI Claude target", what).WithCode("unsupported_for_target")
}

// ToChat translates a parsed Messages request into a chat completion
// request body. Anything the chat API cannot carry is a 400 naming the
// field, rather than a silently different request (docs/messages.md).
func ToChat(r *Request) ([]byte, error) {
	out := chatRequest{
		Model:       r.Model,
		MaxTokens:   r.MaxTokens,
		Temperature: r.Temperature,
		TopP:        r.TopP,
		Stop:        r.StopSequences,
		Stream:      r.Stream,
		Messages:    make([]chatMessage, 0, len(r.Messages)+1),
	}
	if r.Stream {
		// The usage chunk becomes message_delta's usage.
		out.StreamOptions = &oaiwire.StreamOptions{IncludeUsage: true}
	}
	if r.Metadata != nil {
		out.User = r.Metadata.UserID
	}
	if len(r.MCPServers) > 0 && string(r.MCPServers) != "null" {
		return nil, unsupported("mcp_servers", "mcp_servers")
	}
	if len(r.Container) > 0 && string(r.Container) != "null" {
		return nil, unsupported("container", "container")
	}
	if t := r.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			out.ReasoningEffort = effortFor(*t.BudgetTokens)
		case "adaptive":
			out.ReasoningEffort = "medium"
		}
	}
	if r.System != nil {
		if s := r.System.joinText(); s != "" {
			out.Messages = append(out.Messages, chatMessage{Role: "system", Content: s})
		}
	}
	if r.MaxTokens != nil && *r.MaxTokens == 0 {
		return nil, unsupported("max_tokens", "max_tokens 0 (warming the prompt cache)")
	}
	for i := range r.Messages {
		var err error
		switch r.Messages[i].Role {
		case "assistant":
			out.Messages, err = appendAssistant(out.Messages, &r.Messages[i])
		case "system":
			out.Messages = append(out.Messages, chatMessage{Role: "system", Content: r.Messages[i].Content.joinText()})
		default:
			out.Messages, err = appendUser(out.Messages, &r.Messages[i])
		}
		if err != nil {
			return nil, err
		}
	}
	if err := convertTools(r, &out); err != nil {
		return nil, err
	}
	return marshal(&out)
}

// marshal is json.Marshal without HTML escaping: the body goes to an
// API, not a web page, and "<" stays "<" as the client wrote it.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// effortFor maps a thinking budget to OpenAI's reasoning_effort: the
// gateway's Gemini translation maps it back to a budget of the same size
// class.
func effortFor(budget int64) string {
	switch {
	case budget < 4096:
		return "low"
	case budget < 16384:
		return "medium"
	}
	return "high"
}

// joinText is the text of a string or of text blocks, joined by newlines.
func (c *Content) joinText() string {
	if !c.IsBlocks {
		return c.Text
	}
	var b strings.Builder
	for i := range c.Blocks {
		if c.Blocks[i].Type != "text" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.Blocks[i].Text)
	}
	return b.String()
}

// appendUser appends a user turn: its tool results first, as tool
// messages (chat requires them right after the assistant's calls), then
// the rest of its content as one user message.
func appendUser(out []chatMessage, m *Message) ([]chatMessage, error) {
	if !m.Content.IsBlocks {
		return append(out, chatMessage{Role: "user", Content: m.Content.Text}), nil
	}
	var parts []oaiwire.Part
	for i := range m.Content.Blocks {
		b := &m.Content.Blocks[i]
		if b.Type == "tool_result" {
			msg, images, err := toolMessage(b)
			if err != nil {
				return nil, err
			}
			out = append(out, msg)
			// A tool message carries text only: the images a tool
			// returned follow in the user message.
			parts = append(parts, images...)
			continue
		}
		p, err := userPart(b)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return out, nil
	}
	if len(parts) == 1 && parts[0].Type == "text" {
		return append(out, chatMessage{Role: "user", Content: parts[0].Text}), nil
	}
	return append(out, chatMessage{Role: "user", Content: parts}), nil
}

// userPart converts one user content block to a chat content part.
func userPart(b *Block) (oaiwire.Part, error) {
	switch b.Type {
	case "text":
		return oaiwire.Part{Type: "text", Text: b.Text}, nil
	case "image":
		switch b.Source.Type {
		case "base64":
			return oaiwire.Part{Type: "image_url", ImageURL: &oaiwire.ImageURL{URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}}, nil
		case "url":
			return oaiwire.Part{Type: "image_url", ImageURL: &oaiwire.ImageURL{URL: b.Source.URL}}, nil
		}
		return oaiwire.Part{}, unsupported("source", "an image from the Files API (source type file)")
	case "document":
		switch b.Source.Type {
		case "base64":
			name := b.Title
			if name == "" {
				name = "document.pdf"
			}
			return oaiwire.Part{Type: "file", File: &oaiwire.File{FileData: "data:" + b.Source.MediaType + ";base64," + b.Source.Data, Filename: name}}, nil
		case "text":
			return oaiwire.Part{Type: "text", Text: b.Source.Data}, nil
		}
		return oaiwire.Part{}, unsupported("source", "a document with a "+b.Source.Type+" source")
	}
	return oaiwire.Part{}, unsupported("content", "a "+b.Type+" block")
}

// toolMessage converts a tool_result block to a tool message, and returns
// the images it carried apart.
func toolMessage(b *Block) (chatMessage, []oaiwire.Part, error) {
	var text strings.Builder
	var images []oaiwire.Part
	if b.IsError {
		// Chat has no error flag on a tool result: the model is told
		// in words, as Anthropic's own tool-use guide does.
		text.WriteString("Error: ")
	}
	if c := b.Content; c != nil {
		if !c.IsBlocks {
			text.WriteString(c.Text)
		}
		for i := range c.Blocks {
			cb := &c.Blocks[i]
			switch cb.Type {
			case "text":
				if text.Len() > 0 && i > 0 {
					text.WriteByte('\n')
				}
				text.WriteString(cb.Text)
			default:
				p, err := userPart(cb)
				if err != nil {
					return chatMessage{}, nil, err
				}
				images = append(images, p)
			}
		}
	}
	return chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text.String()}, images, nil
}

// appendAssistant appends an assistant turn: its text as content, its
// tool_use blocks as tool calls. Thinking blocks are dropped: their
// signatures are Anthropic's, and no chat target takes them back.
func appendAssistant(out []chatMessage, m *Message) ([]chatMessage, error) {
	if !m.Content.IsBlocks {
		return append(out, chatMessage{Role: "assistant", Content: m.Content.Text}), nil
	}
	msg := chatMessage{Role: "assistant"}
	var text strings.Builder
	hasText := false
	for i := range m.Content.Blocks {
		b := &m.Content.Blocks[i]
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			hasText = true
		case "tool_use":
			tc := oaiwire.ToolCall{ID: b.ID, Type: "function"}
			tc.Function.Name = b.Name
			tc.Function.Arguments = string(b.Input)
			msg.ToolCalls = append(msg.ToolCalls, tc)
		case "thinking", "redacted_thinking":
		default:
			return nil, unsupported("content", "a "+b.Type+" block")
		}
	}
	if hasText {
		msg.Content = text.String()
	}
	if msg.Content == nil && len(msg.ToolCalls) == 0 {
		// A turn of thinking only says nothing a chat target can read.
		return out, nil
	}
	return append(out, msg), nil
}

// convertTools writes the client tools as functions and tool_choice in
// chat's words.
func convertTools(r *Request, out *chatRequest) error {
	for i := range r.Tools {
		t := &r.Tools[i]
		if !t.custom() {
			return unsupported("tools", "the "+t.Type+" tool")
		}
		var ft oaiwire.Tool
		ft.Type = "function"
		ft.Function.Name = t.Name
		ft.Function.Description = t.Description
		ft.Function.Parameters = t.InputSchema
		out.Tools = append(out.Tools, ft)
	}
	c := r.ToolChoice
	if c == nil {
		return nil
	}
	switch c.Type {
	case "auto":
		if len(out.Tools) > 0 {
			out.ToolChoice = "auto"
		}
	case "any":
		out.ToolChoice = "required"
	case "none":
		if len(out.Tools) > 0 {
			out.ToolChoice = "none"
		}
	case "tool":
		nc := namedChoice{Type: "function"}
		nc.Function.Name = c.Name
		out.ToolChoice = nc
	}
	if c.DisableParallelToolUse && len(out.Tools) > 0 {
		f := false
		out.ParallelToolCalls = &f
	}
	return nil
}
