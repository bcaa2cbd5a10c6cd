package cohere

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// request is a v2 /chat body. Only fields Cohere knows are here: it
// rejects unknown ones.
type request struct {
	Model            string          `json:"model"`
	Messages         []message       `json:"messages"`
	Tools            []tool          `json:"tools,omitempty"`
	ToolChoice       string          `json:"tool_choice,omitempty"`
	StrictTools      *bool           `json:"strict_tools,omitempty"`
	Stream           bool            `json:"stream,omitempty"`
	MaxTokens        *int64          `json:"max_tokens,omitempty"`
	StopSequences    []string        `json:"stop_sequences,omitempty"`
	Temperature      *float64        `json:"temperature,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	FrequencyPenalty *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64        `json:"presence_penalty,omitempty"`
	K                *int64          `json:"k,omitempty"`
	P                *float64        `json:"p,omitempty"`
	ResponseFormat   *responseFormat `json:"response_format,omitempty"`
	Thinking         *thinking       `json:"thinking,omitempty"`
}

type message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []toolCall      `json:"tool_calls,omitempty"`
	ToolPlan   string          `json:"tool_plan,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type contentPart struct {
	Type     string            `json:"type"`
	Text     string            `json:"text,omitempty"`
	ImageURL *oaiwire.ImageURL `json:"image_url,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
}

type thinking struct {
	Type        string `json:"type"`
	TokenBudget *int64 `json:"token_budget,omitempty"`
}

// BuildRequest translates an OpenAI chat completion body into a Cohere
// v2 chat body. Messages are already close to OpenAI's; the differences
// are tool_choice, tool plans, sampling names and response formats.
func BuildRequest(body []byte, stream bool) ([]byte, error) {
	in, err := oaiwire.ParseChat(body)
	if err != nil {
		return nil, err
	}
	if in.Model == "" {
		return nil, apierror.BadRequest("model", "model is required")
	}
	out := request{
		Model:            in.Model,
		Stream:           stream,
		MaxTokens:        in.MaxOutput(),
		Temperature:      in.Temperature,
		Seed:             in.Seed,
		FrequencyPenalty: in.FrequencyPenalty,
		PresencePenalty:  in.PresencePenalty,
		K:                in.TopK,
		P:                in.TopP,
	}
	for _, s := range in.Stop {
		if s != "" {
			out.StopSequences = append(out.StopSequences, s)
		}
	}
	for i := range in.Messages {
		m, ok, err := convertMessage(&in.Messages[i], fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return nil, err
		}
		if ok {
			out.Messages = append(out.Messages, m)
		}
	}
	if err := convertTools(in, &out); err != nil {
		return nil, err
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_object":
			out.ResponseFormat = &responseFormat{Type: "json_object"}
		case "json_schema":
			out.ResponseFormat = &responseFormat{Type: "json_object"}
			if rf.JSONSchema != nil {
				out.ResponseFormat.JSONSchema = rf.JSONSchema.Schema
			}
		case "text", "":
		default:
			return nil, apierror.BadRequest("response_format.type", "response_format type %q is not supported", rf.Type)
		}
	}
	if t := in.Thinking; t != nil && t.Type != "" {
		out.Thinking = &thinking{Type: t.Type, TokenBudget: t.BudgetTokens}
	}
	return json.Marshal(&out)
}

func convertTools(in *oaiwire.ChatRequest, out *request) error {
	strict := false
	for i := range in.Tools {
		t := &in.Tools[i]
		if t.Type != "" && t.Type != "function" {
			return apierror.BadRequest(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported by Cohere; use function tools", t.Type)
		}
		var ct tool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description = t.Function.Name, t.Function.Description
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			ct.Function.Parameters = p
		}
		strict = strict || (t.Function.Strict != nil && *t.Function.Strict)
		out.Tools = append(out.Tools, ct)
	}
	if len(out.Tools) == 0 {
		return nil
	}
	if strict {
		out.StrictTools = &strict
	}
	if c := in.ToolChoice; c != nil {
		switch c.Mode {
		case "auto", "":
		case "none":
			out.ToolChoice = "NONE"
		case "required", "any":
			out.ToolChoice = "REQUIRED"
		case "function":
			// Cohere cannot name a tool: offer only that one, required.
			var keep []tool
			for _, t := range out.Tools {
				if t.Function.Name == c.Name {
					keep = append(keep, t)
				}
			}
			if len(keep) == 0 {
				return apierror.BadRequest("tool_choice", "tool_choice names %q, which is not in tools", c.Name)
			}
			out.Tools, out.ToolChoice = keep, "REQUIRED"
		default:
			return apierror.BadRequest("tool_choice", "tool_choice %q is not one of auto, none, required or a function", c.Mode)
		}
	}
	return nil
}

// convertMessage converts one message; ok is false for messages with
// nothing to send (an empty assistant turn).
func convertMessage(m *oaiwire.Message, field string) (message, bool, error) {
	out := message{Role: m.Role}
	switch m.Role {
	case "system", "developer":
		out.Role = "system"
		out.Content = jsonString(m.Content.JoinText())
	case "user":
		c, err := userContent(&m.Content, field)
		if err != nil {
			return out, false, err
		}
		out.Content = c
	case "assistant":
		text := m.Content.JoinText()
		for _, tc := range m.ToolCalls {
			var ct toolCall
			ct.ID, ct.Type = tc.ID, "function"
			ct.Function.Name, ct.Function.Arguments = tc.Function.Name, tc.Function.Arguments
			if strings.TrimSpace(ct.Function.Arguments) == "" {
				ct.Function.Arguments = "{}"
			}
			out.ToolCalls = append(out.ToolCalls, ct)
		}
		switch {
		case len(out.ToolCalls) > 0:
			// Text next to tool calls is Cohere's tool plan.
			out.ToolPlan = text
		case text != "":
			out.Content = jsonString(text)
		default:
			return out, false, nil
		}
	case "tool":
		if m.ToolCallID == "" {
			return out, false, apierror.BadRequest(field+".tool_call_id", "tool messages need tool_call_id")
		}
		out.ToolCallID = m.ToolCallID
		out.Content = jsonString(m.Content.JoinText())
	default:
		return out, false, apierror.BadRequest(field+".role", "role %q is not supported by Cohere", m.Role)
	}
	return out, true, nil
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// userContent keeps text and image parts, which Cohere takes in
// OpenAI's shape; other parts are refused.
func userContent(c *oaiwire.Content, field string) (json.RawMessage, error) {
	if !c.IsParts {
		return jsonString(c.Text), nil
	}
	parts := make([]contentPart, 0, len(c.Parts))
	for j := range c.Parts {
		p := &c.Parts[j]
		switch p.Type {
		case "text":
			parts = append(parts, contentPart{Type: "text", Text: p.Text})
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, apierror.BadRequest(fmt.Sprintf("%s.content[%d].image_url.url", field, j), "image_url.url is required")
			}
			parts = append(parts, contentPart{Type: "image_url", ImageURL: p.ImageURL})
		default:
			return nil, apierror.BadRequest(fmt.Sprintf("%s.content[%d].type", field, j), "content part type %q is not supported by Cohere", p.Type)
		}
	}
	return json.Marshal(parts)
}
