package responses

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
)

// chatRequest is the Chat Completions body ToChat builds. Only fields the
// Responses request set are written. max_output_tokens goes out as
// max_tokens: every translator reads it, and OpenAI-compatible servers
// without a native Responses API (Mistral, older vLLM) know it where
// some refuse max_completion_tokens. Tools and stream options are
// oaiwire's types; messages, tool calls, tool_choice and response_format
// stay raw JSON here because they pass through what the client wrote,
// which oaiwire's reading types would normalise.
type chatRequest struct {
	Model             string                 `json:"model"`
	Messages          []chatMessage          `json:"messages"`
	MaxTokens         *int64                 `json:"max_tokens,omitempty"`
	Temperature       *float64               `json:"temperature,omitempty"`
	TopP              *float64               `json:"top_p,omitempty"`
	Logprobs          bool                   `json:"logprobs,omitempty"`
	TopLogprobs       *int64                 `json:"top_logprobs,omitempty"`
	Tools             []oaiwire.Tool         `json:"tools,omitempty"`
	ToolChoice        json.RawMessage        `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool                  `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    json.RawMessage        `json:"response_format,omitempty"`
	Verbosity         string                 `json:"verbosity,omitempty"`
	ReasoningEffort   string                 `json:"reasoning_effort,omitempty"`
	User              string                 `json:"user,omitempty"`
	PromptCacheKey    string                 `json:"prompt_cache_key,omitempty"`
	Stream            bool                   `json:"stream,omitempty"`
	StreamOptions     *oaiwire.StreamOptions `json:"stream_options,omitempty"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
}

// Conversation returns the items a translated call sends: the replayed
// history of previous_response_id (oldest first, from Store.Chain) then
// this request's input. Instructions are never part of it.
func (r *Request) Conversation(history []Item) []Item {
	out := make([]Item, 0, len(history)+len(r.Input))
	return append(append(out, history...), r.Input...)
}

// ToChat builds the Chat Completions body for a translated target from the
// request and its conversation (Conversation, possibly shortened by
// DropOldest). It refuses, with a 400 naming them, what a chat call
// cannot carry: built-in tools, background mode, conversations, prompt
// templates, and item kinds only OpenAI can run.
func ToChat(r *Request, items []Item) ([]byte, error) {
	if r.Background {
		return nil, apierror.BadRequest("background", "'background' mode is not supported for this provider: the gateway translates the Responses API for it.")
	}
	if len(r.ConversationParam) > 0 && string(r.ConversationParam) != "null" {
		return nil, apierror.BadRequest("conversation", "'conversation' is not supported for this provider; use 'previous_response_id'.")
	}
	if len(r.Prompt) > 0 && string(r.Prompt) != "null" {
		return nil, apierror.BadRequest("prompt", "'prompt' templates are not supported for this provider.")
	}
	out := chatRequest{
		Model:             r.Model,
		MaxTokens:         r.MaxOutputTokens,
		Temperature:       r.Temperature,
		TopP:              r.TopP,
		ParallelToolCalls: r.ParallelToolCalls,
		User:              r.User,
		PromptCacheKey:    r.PromptCacheKey,
		Stream:            r.Stream,
	}
	if out.User == "" {
		out.User = r.SafetyIdentifier
	}
	if r.TopLogprobs != nil {
		out.Logprobs, out.TopLogprobs = true, r.TopLogprobs
	}
	if r.Stream {
		// Usage is needed for response.completed.
		out.StreamOptions = &oaiwire.StreamOptions{IncludeUsage: true}
	}
	if r.Instructions != nil && *r.Instructions != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: jsonString(*r.Instructions)})
	}
	msgs, err := itemsToMessages(items)
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	if out.Tools, err = convertTools(r.Tools); err != nil {
		return nil, err
	}
	if out.ToolChoice, out.Tools, err = convertToolChoice(r.ToolChoice, out.Tools); err != nil {
		return nil, err
	}
	if out.ResponseFormat, out.Verbosity, err = convertText(r.Text); err != nil {
		return nil, err
	}
	out.ReasoningEffort = gjson.GetBytes(r.Reasoning, "effort").String()
	return json.Marshal(out)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// itemsToMessages converts conversation items to chat messages. Function
// calls join the assistant message before them (Anthropic and Bedrock
// reject two assistant turns in a row); reasoning items are not sent,
// because providers cannot take back another model's (or unsigned)
// thinking, and re-reason instead.
func itemsToMessages(items []Item) ([]chatMessage, error) {
	var out []chatMessage
	// open is the index in out of the assistant message function calls
	// may still join, or -1.
	open := -1
	for i, raw := range items {
		it := gjson.ParseBytes(raw)
		typ := it.Get("type").String()
		switch typ {
		case "message":
			m, err := convertMessage(it, i)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			open = -1
			if m.Role == "assistant" {
				open = len(out) - 1
			}
		case "function_call":
			callID := it.Get("call_id").String()
			if callID == "" {
				return nil, apierror.BadRequest("input", "Missing required parameter: 'input[%d].call_id'.", i)
			}
			var tc chatToolCall
			tc.ID, tc.Type = callID, "function"
			tc.Function.Name = it.Get("name").String()
			tc.Function.Arguments = it.Get("arguments").String()
			tc.ExtraContent = rawObject(it.Get("extra_content"))
			if open < 0 {
				out = append(out, chatMessage{Role: "assistant", Content: json.RawMessage(`""`)})
				open = len(out) - 1
			}
			out[open].ToolCalls = append(out[open].ToolCalls, tc)
		case "function_call_output":
			callID := it.Get("call_id").String()
			if callID == "" {
				return nil, apierror.BadRequest("input", "Missing required parameter: 'input[%d].call_id'.", i)
			}
			content, err := toolOutput(it.Get("output"), i)
			if err != nil {
				return nil, err
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: callID, Content: content})
			open = -1
		case "reasoning":
			// Not forwarded; see above. It does not close the open
			// assistant message: OpenAI puts reasoning before the call.
		case "item_reference":
			return nil, apierror.BadRequest("input", "Item with id '%s' not found.", it.Get("id").String())
		default:
			return nil, apierror.BadRequest("input", "Input items of type '%s' are not supported for this provider.", typ)
		}
	}
	return out, nil
}

// convertMessage maps a message item. Content that is all text becomes a
// plain string (every translator and every OpenAI-compatible server takes
// that); otherwise the parts are mapped one by one.
func convertMessage(it gjson.Result, i int) (chatMessage, error) {
	role := it.Get("role").String()
	if role == "developer" {
		// Older OpenAI-compatible servers reject "developer".
		role = "system"
	}
	m := chatMessage{Role: role}
	parts := it.Get("content").Array()
	allText := true
	for _, p := range parts {
		switch p.Get("type").String() {
		case "input_text", "output_text", "text", "refusal":
		default:
			allText = false
		}
	}
	if allText || role != "user" {
		var sb strings.Builder
		for _, p := range parts {
			switch p.Get("type").String() {
			case "input_text", "output_text", "text":
				sb.WriteString(p.Get("text").String())
			case "refusal":
				sb.WriteString(p.Get("refusal").String())
			default:
				return m, apierror.BadRequest("input", "Invalid content in 'input[%d]': only text can appear in a %s message.", i, role)
			}
		}
		m.Content = jsonString(sb.String())
		return m, nil
	}
	out := make([]json.RawMessage, 0, len(parts))
	for j, p := range parts {
		part, err := convertPart(p, i, j)
		if err != nil {
			return m, err
		}
		out = append(out, part)
	}
	m.Content = mustJSON(out)
	return m, nil
}

func convertPart(p gjson.Result, i, j int) (json.RawMessage, error) {
	switch p.Get("type").String() {
	case "input_text", "output_text", "text":
		return textPart("text", p.Get("text").String()), nil
	case "input_image":
		url := p.Get("image_url").String()
		if url == "" {
			return nil, apierror.BadRequest("input", "Invalid 'input[%d].content[%d]': input_image needs 'image_url' for this provider (uploaded file ids are not supported).", i, j)
		}
		img := map[string]string{"url": url}
		if d := p.Get("detail").String(); d != "" {
			img["detail"] = d
		}
		return mustJSON(map[string]any{"type": "image_url", "image_url": img}), nil
	case "input_file":
		f := map[string]string{}
		for _, k := range []string{"file_data", "file_id", "filename"} {
			if v := p.Get(k).String(); v != "" {
				f[k] = v
			}
		}
		if p.Get("file_url").String() != "" && f["file_data"] == "" {
			return nil, apierror.BadRequest("input", "Invalid 'input[%d].content[%d]': input_file by 'file_url' is not supported for this provider; send 'file_data'.", i, j)
		}
		if f["file_data"] == "" && f["file_id"] == "" {
			return nil, apierror.BadRequest("input", "Invalid 'input[%d].content[%d]': input_file needs 'file_data' or 'file_id'.", i, j)
		}
		return mustJSON(map[string]any{"type": "file", "file": f}), nil
	default:
		return nil, apierror.BadRequest("input", "Invalid 'input[%d].content[%d]': content of type '%s' is not supported.", i, j, p.Get("type").String())
	}
}

// toolOutput maps a function_call_output's output (a string or a list of
// input_text parts) to tool message content.
func toolOutput(o gjson.Result, i int) (json.RawMessage, error) {
	if o.Type == gjson.String {
		return jsonString(o.Str), nil
	}
	if !o.IsArray() {
		return nil, apierror.BadRequest("input", "Invalid type for 'input[%d].output': expected a string or an array.", i)
	}
	var sb strings.Builder
	for _, p := range o.Array() {
		if t := p.Get("type").String(); t != "input_text" && t != "output_text" && t != "text" {
			return nil, apierror.BadRequest("input", "Invalid 'input[%d].output': only text output is supported for this provider.", i)
		}
		sb.WriteString(p.Get("text").String())
	}
	return jsonString(sb.String()), nil
}

// defaultParameters is sent for a function tool without parameters;
// several providers require a schema.
var defaultParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// convertTools maps function tools to chat tools and refuses every other
// kind, naming it: a translated provider cannot run OpenAI's built-in
// tools, and dropping one would change the answer silently.
func convertTools(tools []json.RawMessage) ([]oaiwire.Tool, error) {
	out := make([]oaiwire.Tool, 0, len(tools))
	for i, raw := range tools {
		t := gjson.ParseBytes(raw)
		typ := t.Get("type").String()
		if typ != "function" {
			if typ == "" {
				return nil, apierror.BadRequest("tools", "Missing required parameter: 'tools[%d].type'.", i)
			}
			return nil, apierror.BadRequest("tools", "Tool '%s' is not supported for this provider: the gateway translates the Responses API for it and cannot run OpenAI's built-in tools. Remove it or route to an OpenAI target.", typ).WithCode("unsupported_tool")
		}
		var ct oaiwire.Tool
		ct.Type = "function"
		ct.Function.Name = t.Get("name").String()
		if ct.Function.Name == "" {
			return nil, apierror.BadRequest("tools", "Missing required parameter: 'tools[%d].name'.", i)
		}
		ct.Function.Description = t.Get("description").String()
		ct.Function.Parameters = defaultParameters
		if p := t.Get("parameters"); p.IsObject() {
			ct.Function.Parameters = json.RawMessage(p.Raw)
		}
		if s := t.Get("strict"); s.IsBool() {
			b := s.Bool()
			ct.Function.Strict = &b
		}
		out = append(out, ct)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// convertToolChoice maps the flat Responses tool_choice to chat's. An
// allowed_tools choice narrows the tool list and keeps its mode.
func convertToolChoice(raw json.RawMessage, tools []oaiwire.Tool) (json.RawMessage, []oaiwire.Tool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, tools, nil
	}
	c := gjson.ParseBytes(raw)
	if c.Type == gjson.String {
		switch c.Str {
		case "none", "auto", "required":
			return jsonString(c.Str), tools, nil
		}
		return nil, nil, apierror.BadRequest("tool_choice", "Invalid value for 'tool_choice': %q.", c.Str)
	}
	switch typ := c.Get("type").String(); typ {
	case "function":
		name := c.Get("name").String()
		if name == "" {
			return nil, nil, apierror.BadRequest("tool_choice", "Missing required parameter: 'tool_choice.name'.")
		}
		return mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": name}}), tools, nil
	case "allowed_tools":
		mode := c.Get("mode").String()
		if mode != "auto" && mode != "required" {
			return nil, nil, apierror.BadRequest("tool_choice", "Invalid value for 'tool_choice.mode': %q.", mode)
		}
		allowed := map[string]bool{}
		for _, t := range c.Get("tools").Array() {
			if t.Get("type").String() != "function" {
				return nil, nil, apierror.BadRequest("tool_choice", "Tool '%s' is not supported for this provider.", t.Get("type").String()).WithCode("unsupported_tool")
			}
			allowed[t.Get("name").String()] = true
		}
		kept := tools[:0:0]
		for _, t := range tools {
			if allowed[t.Function.Name] {
				kept = append(kept, t)
			}
		}
		return jsonString(mode), kept, nil
	default:
		return nil, nil, apierror.BadRequest("tool_choice", "Tool choice '%s' is not supported for this provider.", typ).WithCode("unsupported_tool")
	}
}

// convertText maps text.format to response_format and passes
// text.verbosity on.
func convertText(raw json.RawMessage) (json.RawMessage, string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "", nil
	}
	t := gjson.ParseBytes(raw)
	verbosity := t.Get("verbosity").String()
	f := t.Get("format")
	if !f.Exists() || f.Type == gjson.Null {
		return nil, verbosity, nil
	}
	switch typ := f.Get("type").String(); typ {
	case "text":
		return nil, verbosity, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), verbosity, nil
	case "json_schema":
		s := f.Get("schema")
		if !s.IsObject() {
			return nil, "", apierror.BadRequest("text.format.schema", "Missing required parameter: 'text.format.schema'.")
		}
		name := f.Get("name").String()
		if name == "" {
			name = "response"
		}
		js := map[string]any{"name": name, "schema": json.RawMessage(s.Raw)}
		if d := f.Get("description").String(); d != "" {
			js["description"] = d
		}
		if st := f.Get("strict"); st.IsBool() {
			js["strict"] = st.Bool()
		}
		return mustJSON(map[string]any{"type": "json_schema", "json_schema": js}), verbosity, nil
	default:
		return nil, "", apierror.BadRequest("text.format.type", "Invalid value for 'text.format.type': %q.", typ)
	}
}
