package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// DefaultMaxTokens is sent when the client gave no max_tokens, because
// the Messages API requires one.
const DefaultMaxTokens = 4096

// VertexVersion is the anthropic_version Vertex AI expects in the body.
const VertexVersion = "vertex-2023-10-16"

// Options say how a Messages body is built.
type Options struct {
	// Vertex builds the body for Claude on Vertex AI: the model is in the
	// URL, not the body, and anthropic_version is a body field.
	Vertex bool
	// Stream asks for an event stream.
	Stream bool
}

// request is the Messages API body. Only fields the API knows are here:
// it rejects unknown ones.
type request struct {
	Model            string            `json:"model,omitempty"`
	AnthropicVersion string            `json:"anthropic_version,omitempty"`
	System           []block           `json:"system,omitempty"`
	Messages         []turn            `json:"messages"`
	MaxTokens        int64             `json:"max_tokens"`
	Metadata         *metadata         `json:"metadata,omitempty"`
	StopSequences    []string          `json:"stop_sequences,omitempty"`
	Stream           bool              `json:"stream,omitempty"`
	Temperature      *float64          `json:"temperature,omitempty"`
	TopP             *float64          `json:"top_p,omitempty"`
	TopK             *int64            `json:"top_k,omitempty"`
	Tools            []tool            `json:"tools,omitempty"`
	ToolChoice       *toolChoice       `json:"tool_choice,omitempty"`
	Thinking         *oaiwire.Thinking `json:"thinking,omitempty"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

type turn struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is any content block; which fields are set depends on Type.
type block struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text,omitempty"`
	Source       *source         `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    *string         `json:"signature,omitempty"`
	Data         string          `json:"data,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// BuildRequest translates an OpenAI chat completion body into a Messages
// API body. Errors are 400s naming the offending field.
func BuildRequest(body []byte, opt Options) ([]byte, error) {
	in, err := oaiwire.ParseChat(body)
	if err != nil {
		return nil, err
	}
	out := request{
		Model:       in.Model,
		Stream:      opt.Stream,
		Temperature: in.Temperature,
		TopP:        in.TopP,
		TopK:        in.TopK,
	}
	if opt.Vertex {
		out.Model, out.AnthropicVersion = "", VertexVersion
	} else if in.Model == "" {
		return nil, apierror.BadRequest("model", "model is required")
	}
	if err := convertMessages(in.Messages, &out); err != nil {
		return nil, err
	}
	for _, s := range in.Stop {
		if s != "" {
			out.StopSequences = append(out.StopSequences, s)
		}
	}
	if in.User != "" {
		out.Metadata = &metadata{UserID: in.User}
	}
	if in.Thinking != nil && in.Thinking.Type != "" {
		out.Thinking = in.Thinking
	}
	out.MaxTokens = DefaultMaxTokens
	if m := in.MaxOutput(); m != nil {
		out.MaxTokens = *m
	} else if t := out.Thinking; t != nil && t.BudgetTokens != nil && *t.BudgetTokens >= DefaultMaxTokens {
		// max_tokens must exceed the thinking budget.
		out.MaxTokens = *t.BudgetTokens + DefaultMaxTokens
	}
	if err := convertTools(in, &out); err != nil {
		return nil, err
	}
	return json.Marshal(&out)
}

func convertTools(in *oaiwire.ChatRequest, out *request) error {
	for i := range in.Tools {
		t := &in.Tools[i]
		if t.Type != "" && t.Type != "function" {
			return apierror.BadRequest(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported by Anthropic; use function tools", t.Type)
		}
		if t.Function.Name == "" {
			return apierror.BadRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function.name is required", i)
		}
		schema := t.Function.Parameters
		if len(bytes.TrimSpace(schema)) == 0 || bytes.Equal(bytes.TrimSpace(schema), []byte("null")) {
			schema = emptySchema
		}
		out.Tools = append(out.Tools, tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema, CacheControl: t.CacheControl})
	}
	if len(out.Tools) == 0 {
		return nil
	}
	var tc *toolChoice
	if c := in.ToolChoice; c != nil {
		switch c.Mode {
		case "auto", "":
			tc = &toolChoice{Type: "auto"}
		case "none":
			tc = &toolChoice{Type: "none"}
		case "required", "any":
			tc = &toolChoice{Type: "any"}
		case "function", "tool":
			tc = &toolChoice{Type: "tool", Name: c.Name}
		default:
			return apierror.BadRequest("tool_choice", "tool_choice %q is not one of auto, none, required or a function", c.Mode)
		}
	}
	if p := in.ParallelToolCalls; p != nil && !*p {
		if tc == nil {
			tc = &toolChoice{Type: "auto"}
		}
		if tc.Type != "none" {
			tc.DisableParallelToolUse = true
		}
	}
	out.ToolChoice = tc
	return nil
}

// convertMessages moves system messages to the top-level system field and
// builds alternating user/assistant turns: tool results become
// tool_result blocks of a user turn, and consecutive turns of the same
// role are merged, as the Messages API requires.
func convertMessages(msgs []oaiwire.Message, out *request) error {
	for i := range msgs {
		m := &msgs[i]
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			blocks, err := contentBlocks(&m.Content, field, true)
			if err != nil {
				return err
			}
			out.System = append(out.System, blocks...)
		case "user":
			blocks, err := contentBlocks(&m.Content, field, false)
			if err != nil {
				return err
			}
			appendTurn(out, "user", blocks)
		case "assistant":
			blocks, err := assistantBlocks(m, field)
			if err != nil {
				return err
			}
			appendTurn(out, "assistant", blocks)
		case "tool":
			b, err := toolResult(m, field)
			if err != nil {
				return err
			}
			appendTurn(out, "user", []block{b})
		default:
			return apierror.BadRequest(field+".role", "role %q is not supported by Anthropic", m.Role)
		}
	}
	for i := range out.Messages {
		if out.Messages[i].Role == "user" {
			toolResultsFirst(out.Messages[i].Content)
		}
	}
	if len(out.Messages) == 0 {
		return apierror.BadRequest("messages", "messages must contain at least one user or assistant message")
	}
	return nil
}

func appendTurn(out *request, role string, blocks []block) {
	if len(blocks) == 0 {
		return // the API rejects empty turns
	}
	if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
		out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
		return
	}
	out.Messages = append(out.Messages, turn{Role: role, Content: blocks})
}

// toolResultsFirst moves tool_result blocks to the front of a user turn,
// keeping their order, because the API requires them to lead.
func toolResultsFirst(bs []block) {
	n := 0
	for i := range bs {
		if bs[i].Type == "tool_result" {
			b := bs[i]
			copy(bs[n+1:i+1], bs[n:i])
			bs[n] = b
			n++
		}
	}
}

func textBlock(s string, cc json.RawMessage) block {
	return block{Type: "text", Text: &s, CacheControl: cc}
}

// contentBlocks converts user or system content. System content allows
// text only.
func contentBlocks(c *oaiwire.Content, field string, textOnly bool) ([]block, error) {
	if !c.IsParts {
		if c.Text == "" {
			return nil, nil
		}
		return []block{textBlock(c.Text, nil)}, nil
	}
	out := make([]block, 0, len(c.Parts))
	for j := range c.Parts {
		p := &c.Parts[j]
		pf := fmt.Sprintf("%s.content[%d]", field, j)
		if p.Type == "text" {
			if p.Text != "" {
				out = append(out, textBlock(p.Text, p.CacheControl))
			}
			continue
		}
		if textOnly {
			return nil, apierror.BadRequest(pf, "only text parts are allowed in system messages")
		}
		b, err := mediaBlock(p, pf)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// mediaBlock converts an image_url or file part to an image or document
// block.
func mediaBlock(p *oaiwire.Part, field string) (block, error) {
	switch p.Type {
	case "image_url":
		if p.ImageURL == nil || p.ImageURL.URL == "" {
			return block{}, apierror.BadRequest(field+".image_url.url", "image_url.url is required")
		}
		url := p.ImageURL.URL
		if mime, data, ok := oaiwire.ParseDataURL(url); ok {
			return block{Type: "image", Source: &source{Type: "base64", MediaType: mime, Data: data}, CacheControl: p.CacheControl}, nil
		}
		if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
			return block{Type: "image", Source: &source{Type: "url", URL: url}, CacheControl: p.CacheControl}, nil
		}
		return block{}, apierror.BadRequest(field+".image_url.url", "image_url.url must be an http(s) URL or a base64 data URL")
	case "file":
		if p.File == nil || p.File.FileData == "" {
			return block{}, apierror.BadRequest(field+".file.file_data", "file parts need file_data (a base64 data URL); file ids are not supported by Anthropic")
		}
		mime, data, ok := oaiwire.ParseDataURL(p.File.FileData)
		if !ok {
			return block{}, apierror.BadRequest(field+".file.file_data", "file_data must be a base64 data URL")
		}
		typ := "document"
		if strings.HasPrefix(mime, "image/") {
			typ = "image"
		}
		return block{Type: typ, Source: &source{Type: "base64", MediaType: mime, Data: data}, CacheControl: p.CacheControl}, nil
	}
	return block{}, apierror.BadRequest(field+".type", "content part type %q is not supported by Anthropic", p.Type)
}

// assistantBlocks converts an assistant turn. Thinking blocks (from
// content_blocks or thinking parts) go first with their signatures, as
// Anthropic requires them back unchanged on the next turn; tool calls
// become tool_use blocks.
func assistantBlocks(m *oaiwire.Message, field string) ([]block, error) {
	out, hasText, err := assistantParts(nil, m.ContentBlocks, field+".content_blocks")
	if err != nil {
		return nil, err
	}
	// content_blocks, when sent, hold the whole turn; content still
	// counts when they carry no text (only the thinking blocks).
	if !hasText {
		if !m.Content.IsParts && m.Content.Text != "" {
			out = append(out, textBlock(m.Content.Text, nil))
		} else if out, _, err = assistantParts(out, m.Content.Parts, field+".content"); err != nil {
			return nil, err
		}
	}
	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		input := json.RawMessage(tc.Function.Arguments)
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		} else if !json.Valid(input) {
			return nil, apierror.BadRequest(fmt.Sprintf("%s.tool_calls[%d].function.arguments", field, j), "tool call arguments must be a JSON object")
		}
		out = append(out, block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	return out, nil
}

func assistantParts(out []block, parts []oaiwire.Part, field string) ([]block, bool, error) {
	hasText := false
	for j := range parts {
		p := &parts[j]
		switch p.Type {
		case "text":
			hasText = true
			if p.Text != "" {
				out = append(out, textBlock(p.Text, p.CacheControl))
			}
		case "thinking":
			th, sig := p.Thinking, p.Signature
			out = append(out, block{Type: "thinking", Thinking: &th, Signature: &sig})
		case "redacted_thinking":
			out = append(out, block{Type: "redacted_thinking", Data: p.Data})
		case "tool_use", "refusal":
			// tool_calls are the source of truth for tool use; a refusal
			// has no Anthropic form and carries nothing the model needs.
		default:
			return nil, false, apierror.BadRequest(fmt.Sprintf("%s[%d].type", field, j), "assistant content part type %q is not supported by Anthropic", p.Type)
		}
	}
	return out, hasText, nil
}

// toolResult converts a tool message to a tool_result block.
func toolResult(m *oaiwire.Message, field string) (block, error) {
	if m.ToolCallID == "" {
		return block{}, apierror.BadRequest(field+".tool_call_id", "tool messages need tool_call_id")
	}
	b := block{Type: "tool_result", ToolUseID: m.ToolCallID}
	if !m.Content.IsParts {
		if m.Content.Text != "" {
			b.Content, _ = json.Marshal(m.Content.Text)
		}
		return b, nil
	}
	blocks, err := contentBlocks(&m.Content, field, false)
	if err != nil {
		return block{}, err
	}
	if len(blocks) > 0 {
		b.Content, _ = json.Marshal(blocks)
	}
	return b, nil
}
