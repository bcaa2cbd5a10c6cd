package messages

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Bounds of a request beyond the gateway's body size limit: they keep the
// translation's work proportional to what a real client sends.
const (
	// MaxMessages bounds the turns of one request.
	MaxMessages = 100_000
	// MaxBlocks bounds the content blocks of one message.
	MaxBlocks = 10_000
	// MaxTools bounds the tools of one request.
	MaxTools = 1_000
	// MaxStopSequences bounds stop_sequences (Anthropic allows several;
	// a list longer than this is no real client's).
	MaxStopSequences = 64
)

// Request is a Messages API request as the translation reads it. Fields
// not listed here reach native targets untouched and are dropped for
// translated ones (see docs/messages.md).
type Request struct {
	Model         string          `json:"model"`
	MaxTokens     *int64          `json:"max_tokens"`
	System        *Content        `json:"system"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools"`
	ToolChoice    *ToolChoice     `json:"tool_choice"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int64          `json:"top_k"`
	Stream        bool            `json:"stream"`
	Metadata      *Metadata       `json:"metadata"`
	Thinking      *Thinking       `json:"thinking"`
	ServiceTier   string          `json:"service_tier"`
	MCPServers    json.RawMessage `json:"mcp_servers"`
	Container     json.RawMessage `json:"container"`
}

// Metadata is the request's metadata object.
type Metadata struct {
	UserID string `json:"user_id"`
}

// Thinking is extended thinking: {"type":"enabled","budget_tokens":N},
// {"type":"disabled"} or {"type":"adaptive"}.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens"`
}

// Message is one turn.
type Message struct {
	Role    string  `json:"role"`
	Content Content `json:"content"`
}

// Content is a string or an array of content blocks.
type Content struct {
	Text   string
	Blocks []Block
	// IsBlocks is set when the content was an array.
	IsBlocks bool
	// set is true once the member was present (and not null).
	set bool
}

// Block is one content block, of any type the translation reads.
type Block struct {
	Type string `json:"type"`
	// Text is a text block's text.
	Text string `json:"text"`
	// Source is an image's or a document's data.
	Source *Source `json:"source"`
	// ID, Name and Input are a tool_use block's.
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// ToolUseID, Content and IsError are a tool_result block's.
	ToolUseID string   `json:"tool_use_id"`
	Content   *Content `json:"content"`
	IsError   bool     `json:"is_error"`
	// Thinking and Signature are a thinking block's; Data a
	// redacted_thinking block's.
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
	// Title is a document's.
	Title string `json:"title"`
}

// Source is the source of an image or a document block.
type Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// Tool is a tool definition: a client tool (type "custom" or none) has a
// name and an input_schema; Anthropic's server and client-schema tools
// (web_search_…, bash_…, text_editor_…) have a versioned type.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// custom reports whether t is a client tool the model calls by schema.
func (t *Tool) custom() bool { return t.Type == "" || t.Type == "custom" }

// ToolChoice is tool_choice.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// blockTypes are the content block types the Messages API defines, by
// where they may appear: "u" in user turns, "a" in assistant turns, "s"
// in system turns.
var blockTypes = map[string]string{
	"text":                                   "uas",
	"image":                                  "ua",
	"document":                               "u",
	"search_result":                          "u",
	"tool_result":                            "u",
	"container_upload":                       "u",
	"tool_use":                               "a",
	"thinking":                               "a",
	"redacted_thinking":                      "a",
	"server_tool_use":                        "a",
	"web_search_tool_result":                 "a",
	"web_fetch_tool_result":                  "a",
	"code_execution_tool_result":             "a",
	"bash_code_execution_tool_result":        "a",
	"text_editor_code_execution_tool_result": "a",
	"mcp_tool_use":                           "a",
	"mcp_tool_result":                        "ua",
}

// imageTypes are the media types Anthropic accepts for base64 images.
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// Parse decodes and validates a Messages request body as Anthropic's API
// does, so a malformed request is a 400 before any provider is called,
// whichever target it goes to. count is set for count_tokens, which
// takes no max_tokens.
func Parse(body []byte, count bool) (*Request, error) {
	if err := jsonlimit.Object(body); err != nil {
		return nil, invalid("", "the request body must be a JSON object (%v)", err)
	}
	r, err := decode(body)
	if err != nil {
		return nil, err
	}
	if err := r.validate(count); err != nil {
		return nil, err
	}
	return r, nil
}

// invalid is a 400 in the Messages API's words: "field: message".
func invalid(field, format string, args ...any) *apierror.Error {
	if field != "" {
		format = field + ": " + format
	}
	return apierror.BadRequest(field, format, args...)
}

func (r *Request) validate(count bool) error {
	if r.Model == "" {
		return invalid("model", "Field required")
	}
	if !count {
		if r.MaxTokens == nil {
			return invalid("max_tokens", "Field required")
		}
		// 0 is allowed: it warms Anthropic's prompt cache without an
		// answer.
		if *r.MaxTokens < 0 {
			return invalid("max_tokens", "Input should be greater than or equal to 0")
		}
	}
	if len(r.Messages) == 0 {
		return invalid("messages", "Field required: at least one message")
	}
	if len(r.Messages) > MaxMessages {
		return invalid("messages", "at most %d messages are accepted", MaxMessages)
	}
	if r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 1) {
		return invalid("temperature", "Input should be between 0 and 1")
	}
	if r.TopP != nil && (*r.TopP < 0 || *r.TopP > 1) {
		return invalid("top_p", "Input should be between 0 and 1")
	}
	if r.TopK != nil && *r.TopK < 0 {
		return invalid("top_k", "Input should be greater than or equal to 0")
	}
	if len(r.StopSequences) > MaxStopSequences {
		return invalid("stop_sequences", "at most %d stop sequences are accepted", MaxStopSequences)
	}
	if r.System != nil && r.System.IsBlocks {
		for i := range r.System.Blocks {
			if r.System.Blocks[i].Type != "text" {
				return invalid("system."+strconv.Itoa(i)+".type", "Input should be 'text'")
			}
		}
	}
	for i := range r.Messages {
		if err := r.Messages[i].validate("messages." + strconv.Itoa(i)); err != nil {
			return err
		}
	}
	if err := r.validateTools(); err != nil {
		return err
	}
	if t := r.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			if t.BudgetTokens == nil {
				return invalid("thinking.enabled.budget_tokens", "Field required")
			}
			if *t.BudgetTokens < 1024 {
				return invalid("thinking.enabled.budget_tokens", "Input should be greater than or equal to 1024")
			}
			if !count && *t.BudgetTokens >= *r.MaxTokens {
				return invalid("max_tokens", "must be greater than thinking.budget_tokens")
			}
		case "disabled", "adaptive":
		default:
			return invalid("thinking.type", "Input tag %s found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'", apierror.QuoteID(t.Type))
		}
	}
	return nil
}

func (r *Request) validateTools() error {
	if len(r.Tools) > MaxTools {
		return invalid("tools", "at most %d tools are accepted", MaxTools)
	}
	names := make(map[string]bool, len(r.Tools))
	for i := range r.Tools {
		t := &r.Tools[i]
		f := "tools." + strconv.Itoa(i)
		if t.Name == "" {
			return invalid(f+".name", "Field required")
		}
		if names[t.Name] {
			return invalid("tools", "Tool names must be unique.")
		}
		names[t.Name] = true
		if t.custom() && !isObject(t.InputSchema) {
			return invalid(f+".input_schema", "Field required: a JSON schema object")
		}
	}
	if c := r.ToolChoice; c != nil {
		switch c.Type {
		case "auto", "any", "none":
		case "tool":
			if c.Name == "" {
				return invalid("tool_choice.tool.name", "Field required")
			}
		default:
			return invalid("tool_choice.type", "Input tag %s found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", apierror.QuoteID(c.Type))
		}
	}
	return nil
}

func (m *Message) validate(f string) error {
	where := ""
	switch m.Role {
	case "user":
		where = "u"
	case "assistant":
		where = "a"
	case "system":
		where = "s"
	default:
		return invalid(f+".role", "Input should be 'user', 'assistant' or 'system'")
	}
	if !m.Content.set {
		return invalid(f+".content", "Field required")
	}
	if !m.Content.IsBlocks {
		return nil
	}
	if len(m.Content.Blocks) > MaxBlocks {
		return invalid(f+".content", "at most %d content blocks are accepted", MaxBlocks)
	}
	for j := range m.Content.Blocks {
		if err := m.Content.Blocks[j].validate(f+".content."+strconv.Itoa(j), where); err != nil {
			return err
		}
	}
	return nil
}

func (b *Block) validate(f, where string) error {
	allowed, known := blockTypes[b.Type]
	if !known {
		return invalid(f+".type", "Input tag %s found using 'type' does not match any of the expected tags", apierror.QuoteID(b.Type))
	}
	if !bytes.Contains([]byte(allowed), []byte(where)) {
		role := map[string]string{"u": "user", "a": "assistant", "s": "system"}[where]
		return invalid(f+".type", "a %s block is not accepted in a %s turn", b.Type, role)
	}
	switch b.Type {
	case "image":
		return b.Source.validate(f+".source", true)
	case "document":
		return b.Source.validate(f+".source", false)
	case "tool_use":
		if b.ID == "" {
			return invalid(f+".id", "Field required")
		}
		if b.Name == "" {
			return invalid(f+".name", "Field required")
		}
		if !isObject(b.Input) {
			return invalid(f+".input", "Input should be a valid dictionary")
		}
	case "tool_result":
		if b.ToolUseID == "" {
			return invalid(f+".tool_use_id", "Field required")
		}
		if b.Content != nil && b.Content.IsBlocks {
			for k := range b.Content.Blocks {
				switch t := b.Content.Blocks[k].Type; t {
				case "text", "image", "document", "search_result":
					if err := b.Content.Blocks[k].validate(f+".content."+strconv.Itoa(k), "u"); err != nil {
						return err
					}
				default:
					return invalid(f+".content."+strconv.Itoa(k)+".type", "Input tag %s found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'search_result'", apierror.QuoteID(t))
				}
			}
		}
	}
	return nil
}

func (s *Source) validate(f string, image bool) error {
	if s == nil {
		return invalid(f, "Field required")
	}
	switch s.Type {
	case "base64":
		if image && !imageTypes[s.MediaType] {
			return invalid(f+".media_type", "Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")
		}
		if s.Data == "" {
			return invalid(f+".data", "Field required")
		}
	case "url":
		if s.URL == "" {
			return invalid(f+".url", "Field required")
		}
	case "file":
	case "text", "content":
		if image {
			return invalid(f+".type", "Input tag %s found using 'type' does not match any of the expected tags: 'base64', 'url', 'file'", apierror.QuoteID(s.Type))
		}
	default:
		return invalid(f+".type", "Input tag %s found using 'type' does not match any of the expected tags", apierror.QuoteID(s.Type))
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
