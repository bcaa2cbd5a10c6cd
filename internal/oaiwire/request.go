package oaiwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// ChatRequest is the part of an OpenAI chat completion request that the
// translators read. Fields not listed here are dropped by decoding, which
// is what providers that reject unknown fields need.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int64          `json:"top_k"`
	N                   *int64          `json:"n"`
	Seed                *int64          `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Stop                Strings         `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options"`
	Tools               []Tool          `json:"tools"`
	ToolChoice          *ToolChoice     `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	User                string          `json:"user"`
	ResponseFormat      *ResponseFormat `json:"response_format"`
	Thinking            *Thinking       `json:"thinking"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	// SafetySettings is Gemini's own field, accepted as an extension.
	SafetySettings json.RawMessage `json:"safety_settings"`
}

// MaxOutput returns max_completion_tokens, else max_tokens, else nil.
func (r *ChatRequest) MaxOutput() *int64 {
	if r.MaxCompletionTokens != nil {
		return r.MaxCompletionTokens
	}
	return r.MaxTokens
}

// StreamOptions is OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Thinking is the extended-thinking field clients send, shaped like
// Anthropic's.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens,omitempty"`
}

// ResponseFormat is OpenAI's response_format.
type ResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// Message is one chat message. ContentBlocks carries provider content
// blocks (thinking with signatures) a client sends back on a later turn.
type Message struct {
	Role             string     `json:"role"`
	Content          Content    `json:"content"`
	Name             string     `json:"name"`
	ToolCalls        []ToolCall `json:"tool_calls"`
	ToolCallID       string     `json:"tool_call_id"`
	ContentBlocks    []Part     `json:"content_blocks"`
	ReasoningContent string     `json:"reasoning_content"`
}

// ToolCall is an assistant's function call. ExtraContent carries provider
// data that must travel with the call, such as Gemini's thought signature.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	ExtraContent *ExtraContent `json:"extra_content,omitempty"`
}

// ExtraContent is the provider-specific part of a tool call, in the shape
// Google's own OpenAI-compatible endpoint uses.
type ExtraContent struct {
	Google *GoogleExtra `json:"google,omitempty"`
}

// GoogleExtra is the Google part of a tool call's extra_content.
type GoogleExtra struct {
	ThoughtSignature string `json:"thought_signature,omitempty"`
}

// ThoughtSignature returns the Gemini thought signature of a tool call.
func (t *ToolCall) ThoughtSignature() string {
	if t.ExtraContent == nil || t.ExtraContent.Google == nil {
		return ""
	}
	return t.ExtraContent.Google.ThoughtSignature
}

// Tool is a function tool definition, as translators read it and as the
// Responses translation writes it (absent optional members are omitted).
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ToolChoice is tool_choice: a mode ("auto", "none", "required") or a
// named function (Mode "function", Name set).
type ToolChoice struct {
	Mode string
	Name string
}

// UnmarshalJSON accepts the string and the object forms.
func (t *ToolChoice) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &t.Mode)
	}
	var o struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	t.Mode, t.Name = o.Type, o.Function.Name
	if t.Name == "" {
		t.Name = o.Name
	}
	if t.Name != "" {
		t.Mode = "function"
	}
	return nil
}

// Content is a message's content: a string, an array of parts, or null.
type Content struct {
	Text  string
	Parts []Part
	// IsParts is true when the content was an array.
	IsParts bool
}

// UnmarshalJSON accepts a string, an array of parts or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		return nil
	case b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	}
	c.IsParts = true
	return json.Unmarshal(b, &c.Parts)
}

// JoinText returns the text of the content: the string itself, or the
// text parts joined with newlines.
func (c *Content) JoinText() string {
	if !c.IsParts {
		return c.Text
	}
	var texts []string
	for i := range c.Parts {
		if c.Parts[i].Type == "text" {
			texts = append(texts, c.Parts[i].Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Part is one content part. Besides OpenAI's text, image_url, file and
// input_audio parts it carries Anthropic-style thinking blocks
// (thinking + signature, redacted_thinking data) sent back by clients.
type Part struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ImageURL     *ImageURL       `json:"image_url,omitempty"`
	File         *File           `json:"file,omitempty"`
	InputAudio   *InputAudio     `json:"input_audio,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	Thinking     string          `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Data         string          `json:"data,omitempty"`
}

// ImageURL is an image_url part's payload; URL may be a data URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// File is a file part's payload; FileData is a data URL.
type File struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
	Format   string `json:"format,omitempty"`
}

// InputAudio is an input_audio part's payload (base64 data, wav or mp3).
type InputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// Strings is a field that may be a string, an array of strings or null.
type Strings []string

// UnmarshalJSON accepts a string, an array of strings or null.
func (s *Strings) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Strings{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

// ParseChat decodes a chat completion request, answering a 400 that names
// the problem when the body does not have OpenAI's shape.
func ParseChat(body []byte) (*ChatRequest, error) {
	var r ChatRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, badShape(err)
	}
	if len(r.Messages) == 0 {
		return nil, apierror.BadRequest("messages", "messages must be a non-empty array")
	}
	return &r, nil
}

// badShape turns a decoding error into a 400 naming the field when the
// decoder knows it.
func badShape(err error) *apierror.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return apierror.BadRequest(te.Field, "invalid request: %s must be %s, not %s", te.Field, te.Type.String(), te.Value)
	}
	return apierror.BadRequest("", "invalid request body: %s", err.Error())
}

// ParseDataURL splits "data:<mime>;base64,<data>". ok is false for
// anything else (http URLs, file ids).
func ParseDataURL(s string) (mime, data string, ok bool) {
	rest, found := strings.CutPrefix(s, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !isB64 {
		return "", "", false
	}
	if i := strings.IndexByte(mime, ';'); i >= 0 {
		mime = mime[:i]
	}
	return mime, data, true
}

// MimeFromURL guesses a media type from a URL's file extension, for
// providers that need one alongside a file URL. Images default to JPEG.
func MimeFromURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	ext := u
	if i := strings.LastIndexByte(u, '.'); i >= 0 && i > strings.LastIndexByte(u, '/') {
		ext = strings.ToLower(u[i+1:])
	}
	switch ext {
	case "png":
		return "image/png"
	case "gif":
		return "image/gif"
	case "webp":
		return "image/webp"
	case "heic":
		return "image/heic"
	case "heif":
		return "image/heif"
	case "pdf":
		return "application/pdf"
	case "mp3":
		return "audio/mpeg"
	case "wav":
		return "audio/wav"
	case "flac":
		return "audio/flac"
	case "mp4":
		return "video/mp4"
	case "mov":
		return "video/quicktime"
	case "webm":
		return "video/webm"
	case "txt":
		return "text/plain"
	}
	return "image/jpeg"
}
