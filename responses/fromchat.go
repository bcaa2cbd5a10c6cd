package responses

import (
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Output item shapes, in OpenAI's member order.

type outputText struct {
	Type        string            `json:"type"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
	Text        string            `json:"text"`
}

type refusalPart struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

type outputMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Content []any  `json:"content"`
	Role    string `json:"role"`
}

type functionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	// ExtraContent is the chat tool call's extra_content (Gemini's thought
	// signature), kept so a replayed call carries it back: Gemini refuses
	// a function call turn without its signature. SDKs ignore the member.
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
}

type summaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type reasoningItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Summary []summaryText `json:"summary"`
}

// FromChat converts a translated provider's chat completion (as the
// gateway's translators produce it) into the Response for r. Reasoning
// (reasoning_content) becomes a reasoning item first, then the message,
// then one function_call item per tool call. Usage is in the result's
// Usage, for rate limits and budgets.
func FromChat(chat []byte, r *Request) (*Response, error) {
	if err := jsonlimit.Object(chat); err != nil {
		return nil, apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the provider's answer could not be read")
	}
	c := gjson.ParseBytes(chat)
	choice := c.Get("choices.0")
	if !choice.Exists() {
		return nil, apierror.New(http.StatusBadGateway, apierror.TypeUpstream, "the provider's answer has no choices")
	}
	resp := r.NewResponse()
	if m := c.Get("model").String(); m != "" {
		resp.Model = m
	}
	msg := choice.Get("message")
	finish := choice.Get("finish_reason").String()
	resp.Output = outputItems(r, msg, finish)
	resp.Usage = usageFromChat(c.Get("usage"))
	resp.finish(finish, r.now())
	return resp, nil
}

func outputItems(r *Request, msg gjson.Result, finish string) []Item {
	out := []Item{}
	if rc := msg.Get("reasoning_content").String(); rc != "" {
		out = append(out, mustJSON(reasoningItem{ID: r.NewID("rs_"), Type: "reasoning", Summary: []summaryText{{Type: "summary_text", Text: rc}}}))
	}
	var parts []any
	if t := msg.Get("content"); t.Type == gjson.String && t.Str != "" {
		parts = append(parts, outputText{Type: "output_text", Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}, Text: t.Str})
	}
	if rf := msg.Get("refusal"); rf.Type == gjson.String && rf.Str != "" {
		parts = append(parts, refusalPart{Type: "refusal", Refusal: rf.Str})
	}
	status := "completed"
	if finish == "length" || finish == "max_tokens" {
		status = "incomplete"
	}
	if len(parts) > 0 {
		out = append(out, mustJSON(outputMessage{ID: r.NewID("msg_"), Type: "message", Status: status, Content: parts, Role: "assistant"}))
	}
	for _, tc := range msg.Get("tool_calls").Array() {
		callID := tc.Get("id").String()
		if callID == "" {
			callID = r.NewID("call_")
		}
		out = append(out, mustJSON(functionCall{
			ID: r.NewID("fc_"), Type: "function_call", Status: "completed",
			Arguments: tc.Get("function.arguments").String(), CallID: callID, Name: tc.Get("function.name").String(),
			ExtraContent: rawObject(tc.Get("extra_content")),
		}))
	}
	return out
}

// JSON returns the response object's JSON.
func (resp *Response) JSON() []byte { return mustJSON(resp) }

// rawObject returns r's JSON when it is an object, else nil.
func rawObject(r gjson.Result) json.RawMessage {
	if !r.IsObject() {
		return nil
	}
	return json.RawMessage(r.Raw)
}
