package bedrock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// The OpenAI chat request, as far as Converse can express it. Fields not
// listed here are dropped: Converse rejects unknown fields. Content, stop,
// tool_choice and thinking stay raw because Converse's translation reads
// their every form itself; tool calls and tools are oaiwire's.
type chatRequest struct {
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                json.RawMessage `json:"top_k"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	Tools               []oaiwire.Tool  `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Thinking            json.RawMessage `json:"thinking"`
}

type chatMessage struct {
	Role       string             `json:"role"`
	Content    json.RawMessage    `json:"content"`
	ToolCalls  []oaiwire.ToolCall `json:"tool_calls"`
	ToolCallID string             `json:"tool_call_id"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// The Converse request (bedrock-runtime API reference, Converse).
type converseRequest struct {
	Messages                     []cvMessage                `json:"messages"`
	System                       []cvSystem                 `json:"system,omitempty"`
	InferenceConfig              *cvInference               `json:"inferenceConfig,omitempty"`
	ToolConfig                   *cvToolConfig              `json:"toolConfig,omitempty"`
	AdditionalModelRequestFields map[string]json.RawMessage `json:"additionalModelRequestFields,omitempty"`
}

type cvMessage struct {
	Role    string    `json:"role"`
	Content []cvBlock `json:"content"`
}

type cvSystem struct {
	Text string `json:"text"`
}

// cvBlock is a Converse ContentBlock, a union: exactly one member is set.
type cvBlock struct {
	Text       string        `json:"text,omitempty"`
	Image      *cvImage      `json:"image,omitempty"`
	ToolUse    *cvToolUse    `json:"toolUse,omitempty"`
	ToolResult *cvToolResult `json:"toolResult,omitempty"`
}

type cvImage struct {
	Format string `json:"format"`
	Source struct {
		Bytes string `json:"bytes"`
	} `json:"source"`
}

type cvToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type cvToolResult struct {
	ToolUseID string         `json:"toolUseId"`
	Content   []cvResultPart `json:"content"`
}

type cvResultPart struct {
	Text string `json:"text"`
}

type cvInference struct {
	MaxTokens     *int64   `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type cvToolConfig struct {
	Tools      []cvTool        `json:"tools"`
	ToolChoice json.RawMessage `json:"toolChoice,omitempty"`
}

type cvTool struct {
	ToolSpec cvToolSpec `json:"toolSpec"`
}

type cvToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// ConverseRequest translates an OpenAI chat completion request body into a
// Converse request body. The model and stream flags travel in the URL, not
// the body. Errors are 400s naming the offending field.
func ConverseRequest(body []byte) ([]byte, error) {
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, apierror.BadRequest("", "invalid chat request: %v", err)
	}
	if len(in.Messages) == 0 {
		return nil, apierror.BadRequest("messages", "messages must contain at least one message")
	}
	if in.N != nil && *in.N > 1 {
		return nil, apierror.BadRequest("n", "provider bedrock returns one choice per request: n must be 1")
	}
	out := converseRequest{Messages: make([]cvMessage, 0, len(in.Messages))}
	hasToolBlocks := false
	for i := range in.Messages {
		m := &in.Messages[i]
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			texts, err := textParts(m.Content, field+".content")
			if err != nil {
				return nil, err
			}
			for _, t := range texts {
				out.System = append(out.System, cvSystem{Text: t})
			}
		case "user":
			blocks, err := userBlocks(m.Content, field+".content")
			if err != nil {
				return nil, err
			}
			out.Messages = appendTurn(out.Messages, "user", blocks)
		case "assistant":
			blocks, err := assistantBlocks(m, field)
			if err != nil {
				return nil, err
			}
			hasToolBlocks = hasToolBlocks || len(m.ToolCalls) > 0
			out.Messages = appendTurn(out.Messages, "assistant", blocks)
		case "tool":
			if m.ToolCallID == "" {
				return nil, apierror.BadRequest(field+".tool_call_id", "%s: a tool message needs tool_call_id", field)
			}
			texts, err := textParts(m.Content, field+".content")
			if err != nil {
				return nil, err
			}
			res := &cvToolResult{ToolUseID: m.ToolCallID, Content: make([]cvResultPart, 0, len(texts))}
			for _, t := range texts {
				res.Content = append(res.Content, cvResultPart{Text: t})
			}
			if len(res.Content) == 0 {
				// Converse needs at least one result part.
				res.Content = append(res.Content, cvResultPart{Text: " "})
			}
			hasToolBlocks = true
			// Tool results are user turns in Converse.
			out.Messages = appendTurn(out.Messages, "user", []cvBlock{{ToolResult: res}})
		default:
			return nil, apierror.BadRequest(field+".role", "%s: role %q is not supported by provider bedrock", field, m.Role)
		}
	}

	inf := cvInference{Temperature: in.Temperature, TopP: in.TopP, MaxTokens: in.MaxCompletionTokens}
	if inf.MaxTokens == nil {
		inf.MaxTokens = in.MaxTokens
	}
	if len(in.Stop) > 0 && !isNull(in.Stop) {
		stops, err := stopSequences(in.Stop)
		if err != nil {
			return nil, err
		}
		inf.StopSequences = stops
	}
	if inf.MaxTokens != nil || inf.Temperature != nil || inf.TopP != nil || len(inf.StopSequences) > 0 {
		out.InferenceConfig = &inf
	}

	tc, err := toolConfig(in.Tools, in.ToolChoice, hasToolBlocks)
	if err != nil {
		return nil, err
	}
	out.ToolConfig = tc

	if len(in.TopK) > 0 && !isNull(in.TopK) {
		out.AdditionalModelRequestFields = map[string]json.RawMessage{"top_k": in.TopK}
	}
	if len(in.Thinking) > 0 && !isNull(in.Thinking) {
		if out.AdditionalModelRequestFields == nil {
			out.AdditionalModelRequestFields = map[string]json.RawMessage{}
		}
		// Bedrock's name for Anthropic's thinking object.
		out.AdditionalModelRequestFields["reasoning_config"] = in.Thinking
	}
	return json.Marshal(&out)
}

// appendTurn adds blocks as a turn of role, merging them into the previous
// message when it has the same role: Converse requires user and assistant
// turns to alternate, while OpenAI clients send consecutive tool results
// and user messages as separate messages.
func appendTurn(msgs []cvMessage, role string, blocks []cvBlock) []cvMessage {
	if len(blocks) == 0 {
		return msgs
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, cvMessage{Role: role, Content: blocks})
}

// textParts reads content that may only hold text: a string or an array
// of text parts. Empty strings are skipped, as Converse rejects blank text.
func textParts(raw json.RawMessage, field string) ([]string, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, apierror.BadRequest(field, "%s: invalid string", field)
		}
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, apierror.BadRequest(field, "%s must be a string or an array of content parts", field)
	}
	out := make([]string, 0, len(parts))
	for j, p := range parts {
		if p.Type != "text" {
			return nil, apierror.BadRequest(fmt.Sprintf("%s[%d].type", field, j), "%s[%d]: only text parts are allowed here, got %q", field, j, p.Type)
		}
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return out, nil
}

// userBlocks reads a user message's content: text and images.
func userBlocks(raw json.RawMessage, field string) ([]cvBlock, error) {
	if len(raw) == 0 || isNull(raw) || raw[0] == '"' {
		texts, err := textParts(raw, field)
		if err != nil {
			return nil, err
		}
		blocks := make([]cvBlock, 0, len(texts))
		for _, t := range texts {
			blocks = append(blocks, cvBlock{Text: t})
		}
		return blocks, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, apierror.BadRequest(field, "%s must be a string or an array of content parts", field)
	}
	blocks := make([]cvBlock, 0, len(parts))
	for j, p := range parts {
		pf := fmt.Sprintf("%s[%d]", field, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, cvBlock{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, apierror.BadRequest(pf+".image_url", "%s: image_url is required", pf)
			}
			img, err := imageBlock(p.ImageURL.URL, pf+".image_url.url")
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, cvBlock{Image: img})
		default:
			return nil, apierror.BadRequest(pf+".type", "%s: content part type %q is not supported by provider bedrock (text and image_url are)", pf, p.Type)
		}
	}
	return blocks, nil
}

// imageBlock turns a data: URL into a Converse image block. Bedrock cannot
// fetch http(s) URLs, and the gateway does not fetch them on its behalf.
func imageBlock(u, field string) (*cvImage, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return nil, apierror.BadRequest(field, "%s: provider bedrock cannot fetch image URLs; send the image inline as a data:image/...;base64 URL", field)
	}
	meta, data, ok := strings.Cut(rest, ",")
	mime, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 || data == "" {
		return nil, apierror.BadRequest(field, "%s: expected a base64 data URL (data:image/png;base64,...)", field)
	}
	var format string
	switch strings.ToLower(mime) {
	case "image/png":
		format = "png"
	case "image/jpeg", "image/jpg":
		format = "jpeg"
	case "image/gif":
		format = "gif"
	case "image/webp":
		format = "webp"
	default:
		return nil, apierror.BadRequest(field, "%s: image type %q is not supported by provider bedrock (png, jpeg, gif, webp are)", field, mime)
	}
	img := &cvImage{Format: format}
	img.Source.Bytes = data
	return img, nil
}

// assistantBlocks reads an assistant turn: its text and its tool calls.
// Reasoning text from earlier turns is not sent back: without the
// signature Bedrock issued, it would be rejected.
func assistantBlocks(m *chatMessage, field string) ([]cvBlock, error) {
	texts, err := textParts(m.Content, field+".content")
	if err != nil {
		return nil, err
	}
	blocks := make([]cvBlock, 0, len(texts)+len(m.ToolCalls))
	for _, t := range texts {
		blocks = append(blocks, cvBlock{Text: t})
	}
	for j, tc := range m.ToolCalls {
		args := json.RawMessage(`{}`)
		if a := strings.TrimSpace(tc.Function.Arguments); a != "" {
			if !json.Valid([]byte(a)) || a[0] != '{' {
				f := fmt.Sprintf("%s.tool_calls[%d].function.arguments", field, j)
				return nil, apierror.BadRequest(f, "%s must be a JSON object", f)
			}
			args = json.RawMessage(a)
		}
		blocks = append(blocks, cvBlock{ToolUse: &cvToolUse{ToolUseID: tc.ID, Name: tc.Function.Name, Input: args}})
	}
	return blocks, nil
}

func stopSequences(raw json.RawMessage) ([]string, error) {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, apierror.BadRequest("stop", "stop must be a string or an array of strings")
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, apierror.BadRequest("stop", "stop must be a string or an array of strings")
	}
	return list, nil
}

// toolConfig maps tools and tool_choice. OpenAI's "none" has no Converse
// equivalent: the tools are left out unless the conversation already holds
// tool blocks, which Converse only accepts with a toolConfig.
func toolConfig(tools []oaiwire.Tool, choice json.RawMessage, hasToolBlocks bool) (*cvToolConfig, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	tc := &cvToolConfig{Tools: make([]cvTool, 0, len(tools))}
	for i, t := range tools {
		if t.Type != "" && t.Type != "function" {
			return nil, apierror.BadRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d]: tool type %q is not supported by provider bedrock", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, apierror.BadRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d]: function.name is required", i)
		}
		spec := cvToolSpec{Name: t.Function.Name, Description: t.Function.Description}
		spec.InputSchema.JSON = t.Function.Parameters
		if len(spec.InputSchema.JSON) == 0 || isNull(spec.InputSchema.JSON) {
			spec.InputSchema.JSON = emptySchema
		}
		tc.Tools = append(tc.Tools, cvTool{ToolSpec: spec})
	}
	if len(choice) == 0 || isNull(choice) {
		return tc, nil
	}
	if choice[0] == '"' {
		var s string
		_ = json.Unmarshal(choice, &s)
		switch s {
		case "auto":
			tc.ToolChoice = json.RawMessage(`{"auto":{}}`)
		case "required":
			tc.ToolChoice = json.RawMessage(`{"any":{}}`)
		case "none":
			if !hasToolBlocks {
				return nil, nil
			}
		default:
			return nil, apierror.BadRequest("tool_choice", "tool_choice %q is not one of none, auto, required", s)
		}
		return tc, nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(choice, &named); err != nil || named.Function.Name == "" {
		return nil, apierror.BadRequest("tool_choice", "tool_choice must be none, auto, required or {\"type\":\"function\",\"function\":{\"name\":...}}")
	}
	b, _ := json.Marshal(map[string]map[string]string{"tool": {"name": named.Function.Name}})
	tc.ToolChoice = b
	return tc, nil
}

func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
