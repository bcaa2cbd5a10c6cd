package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// request is a generateContent body. Only fields Gemini knows are here:
// it rejects unknown ones.
type request struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []toolDecl        `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
	SafetySettings    json.RawMessage   `json:"safetySettings,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type fileData struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type toolDecl struct {
	FunctionDeclarations []funcDecl `json:"functionDeclarations"`
}

type funcDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	} `json:"functionCallingConfig"`
}

type generationConfig struct {
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"topP,omitempty"`
	TopK             *int64          `json:"topK,omitempty"`
	CandidateCount   *int64          `json:"candidateCount,omitempty"`
	MaxOutputTokens  *int64          `json:"maxOutputTokens,omitempty"`
	StopSequences    []string        `json:"stopSequences,omitempty"`
	PresencePenalty  *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty *float64        `json:"frequencyPenalty,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	ResponseMimeType string          `json:"responseMimeType,omitempty"`
	ResponseSchema   json.RawMessage `json:"responseSchema,omitempty"`
	ThinkingConfig   *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  *int64 `json:"thinkingBudget,omitempty"`
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
}

// effortBudgets maps OpenAI's reasoning_effort to a thinking budget, as
// Google's own OpenAI-compatible endpoint does.
var effortBudgets = map[string]int64{"none": 0, "minimal": 1024, "low": 1024, "medium": 8192, "high": 24576}

// BuildRequest translates an OpenAI chat completion body into a Gemini
// generateContent body (the same for the Gemini API and Vertex AI).
// Errors are 400s naming the offending field.
func BuildRequest(body []byte) ([]byte, error) {
	in, err := oaiwire.ParseChat(body)
	if err != nil {
		return nil, err
	}
	var out request
	if err := convertMessages(in.Messages, &out); err != nil {
		return nil, err
	}
	if err := convertTools(in, &out); err != nil {
		return nil, err
	}
	gc, err := generation(in)
	if err != nil {
		return nil, err
	}
	if !gc.empty() {
		out.GenerationConfig = gc
	}
	if len(in.SafetySettings) > 0 && !bytes.Equal(in.SafetySettings, []byte("null")) {
		out.SafetySettings = in.SafetySettings
	}
	return json.Marshal(&out)
}

func (g *generationConfig) empty() bool {
	return g.Temperature == nil && g.TopP == nil && g.TopK == nil && g.CandidateCount == nil &&
		g.MaxOutputTokens == nil && len(g.StopSequences) == 0 && g.PresencePenalty == nil &&
		g.FrequencyPenalty == nil && g.Seed == nil && g.ResponseMimeType == "" && g.ThinkingConfig == nil
}

func generation(in *oaiwire.ChatRequest) (*generationConfig, error) {
	gc := &generationConfig{
		Temperature:      in.Temperature,
		TopP:             in.TopP,
		TopK:             in.TopK,
		CandidateCount:   in.N,
		MaxOutputTokens:  in.MaxOutput(),
		PresencePenalty:  in.PresencePenalty,
		FrequencyPenalty: in.FrequencyPenalty,
		Seed:             in.Seed,
	}
	for _, s := range in.Stop {
		if s != "" {
			gc.StopSequences = append(gc.StopSequences, s)
		}
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_object":
			gc.ResponseMimeType = "application/json"
		case "json_schema":
			gc.ResponseMimeType = "application/json"
			if rf.JSONSchema != nil {
				s, err := CleanSchema(rf.JSONSchema.Schema)
				if err != nil {
					return nil, apierror.BadRequest("response_format.json_schema.schema", "invalid JSON schema: %v", err)
				}
				gc.ResponseSchema = s
			}
		case "text", "":
		default:
			return nil, apierror.BadRequest("response_format.type", "response_format type %q is not supported", rf.Type)
		}
	}
	switch {
	case in.Thinking != nil && in.Thinking.Type == "disabled":
		zero := int64(0)
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: &zero}
	case in.Thinking != nil && in.Thinking.Type != "":
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: in.Thinking.BudgetTokens, IncludeThoughts: true}
	case in.ReasoningEffort != "":
		b, ok := effortBudgets[in.ReasoningEffort]
		if !ok {
			return nil, apierror.BadRequest("reasoning_effort", "reasoning_effort must be none, minimal, low, medium or high")
		}
		gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: &b}
	}
	return gc, nil
}

func convertTools(in *oaiwire.ChatRequest, out *request) error {
	var decls []funcDecl
	for i := range in.Tools {
		t := &in.Tools[i]
		if t.Type != "" && t.Type != "function" {
			return apierror.BadRequest(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported by Gemini; use function tools", t.Type)
		}
		if t.Function.Name == "" {
			return apierror.BadRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function.name is required", i)
		}
		params, err := CleanSchema(t.Function.Parameters)
		if err != nil {
			return apierror.BadRequest(fmt.Sprintf("tools[%d].function.parameters", i), "invalid JSON schema: %v", err)
		}
		decls = append(decls, funcDecl{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
	}
	if len(decls) == 0 {
		return nil
	}
	out.Tools = []toolDecl{{FunctionDeclarations: decls}}
	if c := in.ToolChoice; c != nil {
		tc := &toolConfig{}
		switch c.Mode {
		case "auto", "":
			tc.FunctionCallingConfig.Mode = "AUTO"
		case "none":
			tc.FunctionCallingConfig.Mode = "NONE"
		case "required", "any":
			tc.FunctionCallingConfig.Mode = "ANY"
		case "function":
			tc.FunctionCallingConfig.Mode = "ANY"
			tc.FunctionCallingConfig.AllowedFunctionNames = []string{c.Name}
		default:
			return apierror.BadRequest("tool_choice", "tool_choice %q is not one of auto, none, required or a function", c.Mode)
		}
		out.ToolConfig = tc
	}
	return nil
}

// convertMessages builds contents: system messages go to
// systemInstruction, assistant turns have role "model", tool results
// become functionResponse parts of a user turn named after the call they
// answer, and consecutive turns of one role are merged.
func convertMessages(msgs []oaiwire.Message, out *request) error {
	callNames := map[string]string{} // tool call id → function name
	for i := range msgs {
		m := &msgs[i]
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			text := m.Content.JoinText()
			if text == "" {
				continue
			}
			if out.SystemInstruction == nil {
				out.SystemInstruction = &content{}
			}
			out.SystemInstruction.Parts = append(out.SystemInstruction.Parts, part{Text: text})
		case "user":
			parts, err := userParts(&m.Content, field)
			if err != nil {
				return err
			}
			appendContent(out, "user", parts)
		case "assistant":
			parts, err := modelParts(m, field, callNames)
			if err != nil {
				return err
			}
			appendContent(out, "model", parts)
		case "tool":
			name := callNames[m.ToolCallID]
			if name == "" {
				name = m.Name
			}
			if name == "" {
				return apierror.BadRequest(field+".tool_call_id", "tool_call_id %q does not match a tool call of an earlier assistant message", m.ToolCallID)
			}
			appendContent(out, "user", []part{{FunctionResponse: &functionResponse{Name: name, Response: toolResponse(m.Content.JoinText())}}})
		default:
			return apierror.BadRequest(field+".role", "role %q is not supported by Gemini", m.Role)
		}
	}
	if len(out.Contents) == 0 {
		return apierror.BadRequest("messages", "messages must contain at least one user or assistant message")
	}
	return nil
}

// toolResponse wraps a tool's output as the object Gemini requires: a
// JSON object is sent as is, anything else under "output", the key
// Gemini documents for function output.
func toolResponse(text string) json.RawMessage {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{"output": text})
	return b
}

func appendContent(out *request, role string, parts []part) {
	if len(parts) == 0 {
		return
	}
	if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
		out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
		return
	}
	out.Contents = append(out.Contents, content{Role: role, Parts: parts})
}

func userParts(c *oaiwire.Content, field string) ([]part, error) {
	if !c.IsParts {
		if c.Text == "" {
			return nil, nil
		}
		return []part{{Text: c.Text}}, nil
	}
	out := make([]part, 0, len(c.Parts))
	for j := range c.Parts {
		p := &c.Parts[j]
		pf := fmt.Sprintf("%s.content[%d]", field, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, part{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, apierror.BadRequest(pf+".image_url.url", "image_url.url is required")
			}
			mp, err := mediaPart(p.ImageURL.URL, "")
			if err != nil {
				return nil, apierror.BadRequest(pf+".image_url.url", "%v", err)
			}
			out = append(out, mp)
		case "file":
			if p.File == nil || (p.File.FileData == "" && p.File.FileID == "") {
				return nil, apierror.BadRequest(pf+".file", "file parts need file_data or file_id")
			}
			src := p.File.FileData
			if src == "" {
				src = p.File.FileID
			}
			mp, err := mediaPart(src, p.File.Format)
			if err != nil {
				return nil, apierror.BadRequest(pf+".file", "%v", err)
			}
			out = append(out, mp)
		case "input_audio":
			if p.InputAudio == nil || p.InputAudio.Data == "" {
				return nil, apierror.BadRequest(pf+".input_audio.data", "input_audio.data is required")
			}
			out = append(out, part{InlineData: &blob{MimeType: "audio/" + p.InputAudio.Format, Data: p.InputAudio.Data}})
		default:
			return nil, apierror.BadRequest(pf+".type", "content part type %q is not supported by Gemini", p.Type)
		}
	}
	return out, nil
}

// mediaPart turns a data URL into inline data and any other URL (http,
// gs://, a Files API URI) into file data with a guessed media type.
func mediaPart(src, mime string) (part, error) {
	if m, data, ok := oaiwire.ParseDataURL(src); ok {
		return part{InlineData: &blob{MimeType: m, Data: data}}, nil
	}
	if strings.HasPrefix(src, "data:") {
		return part{}, fmt.Errorf("data URLs must be base64-encoded")
	}
	if !strings.Contains(src, "://") && !strings.HasPrefix(src, "files/") {
		return part{}, fmt.Errorf("expected a URL or a base64 data URL")
	}
	if mime == "" {
		mime = oaiwire.MimeFromURL(src)
	}
	return part{FileData: &fileData{MimeType: mime, FileURI: src}}, nil
}

// modelParts converts an assistant message, recording its tool call ids
// so later tool results can be named.
func modelParts(m *oaiwire.Message, field string, callNames map[string]string) ([]part, error) {
	var out []part
	if t := m.Content.JoinText(); t != "" {
		out = append(out, part{Text: t})
	}
	for j := range m.ToolCalls {
		tc := &m.ToolCalls[j]
		args := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
		if len(args) == 0 {
			args = json.RawMessage("{}")
		} else if !json.Valid(args) || args[0] != '{' {
			return nil, apierror.BadRequest(fmt.Sprintf("%s.tool_calls[%d].function.arguments", field, j), "tool call arguments must be a JSON object")
		}
		if tc.ID != "" {
			callNames[tc.ID] = tc.Function.Name
		}
		out = append(out, part{FunctionCall: &functionCall{Name: tc.Function.Name, Args: args}, ThoughtSignature: tc.ThoughtSignature()})
	}
	return out, nil
}
