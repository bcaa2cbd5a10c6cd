package responses

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// Response is the Responses API's response object as the gateway writes
// it for translated targets. Required members are always present (null
// when unset), as OpenAI sends them.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	CompletedAt        *int64             `json:"completed_at"`
	Background         bool               `json:"background"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	MaxToolCalls       *int64             `json:"max_tool_calls"`
	Model              string             `json:"model"`
	Output             []Item             `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
	Reasoning          json.RawMessage    `json:"reasoning"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	ServiceTier        string             `json:"service_tier"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               json.RawMessage    `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopLogprobs        int64              `json:"top_logprobs"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *Usage             `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

// ResponseError is the error of a failed response.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Usage is the Responses usage object; the gateway charges rate limits
// and budgets from it.
type Usage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// NewResponse returns the response skeleton for r with status
// in_progress and no output: the echo of the request's settings, with
// OpenAI's defaults where the client gave none.
func (r *Request) NewResponse() *Response {
	resp := &Response{
		ID:                r.ID,
		Object:            "response",
		CreatedAt:         r.CreatedAt,
		Status:            "in_progress",
		Instructions:      r.Instructions,
		MaxOutputTokens:   r.MaxOutputTokens,
		MaxToolCalls:      r.MaxToolCalls,
		Model:             r.Model,
		Output:            []Item{},
		ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls,
		ServiceTier:       "default",
		Store:             r.Stored(),
		Temperature:       1,
		TopP:              1,
		Truncation:        "disabled",
		Tools:             r.Tools,
		Metadata:          r.Metadata,
		Reasoning:         json.RawMessage(`{"effort":null,"summary":null}`),
		Text:              json.RawMessage(`{"format":{"type":"text"}}`),
		ToolChoice:        json.RawMessage(`"auto"`),
	}
	if r.Temperature != nil {
		resp.Temperature = *r.Temperature
	}
	if r.TopP != nil {
		resp.TopP = *r.TopP
	}
	if r.TopLogprobs != nil {
		resp.TopLogprobs = *r.TopLogprobs
	}
	if r.Truncation != "" {
		resp.Truncation = r.Truncation
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	if r.PreviousResponseID != "" {
		p := r.PreviousResponseID
		resp.PreviousResponseID = &p
	}
	if r.User != "" {
		u := r.User
		resp.User = &u
	}
	if r.SafetyIdentifier != "" {
		s := r.SafetyIdentifier
		resp.SafetyIdentifier = &s
	}
	if r.PromptCacheKey != "" {
		k := r.PromptCacheKey
		resp.PromptCacheKey = &k
	}
	if len(r.Reasoning) > 0 && string(r.Reasoning) != "null" {
		resp.Reasoning = r.Reasoning
	}
	if len(r.Text) > 0 && string(r.Text) != "null" && gjson.GetBytes(r.Text, "format").Exists() {
		resp.Text = r.Text
	}
	if len(r.ToolChoice) > 0 && string(r.ToolChoice) != "null" {
		resp.ToolChoice = r.ToolChoice
	}
	return resp
}

// finish sets the terminal status from the chat finish reason: length
// is incomplete (max_output_tokens), content_filter incomplete
// (content_filter), anything else completed.
func (resp *Response) finish(finishReason string, at int64) {
	switch finishReason {
	case "length", "max_tokens":
		resp.Status = "incomplete"
		resp.IncompleteDetails = &IncompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		resp.Status = "incomplete"
		resp.IncompleteDetails = &IncompleteDetails{Reason: "content_filter"}
	default:
		resp.Status = "completed"
		resp.CompletedAt = &at
	}
}

// usageFromChat converts a chat usage object; cached tokens come from
// prompt_tokens_details or Anthropic-style cache_read_input_tokens.
func usageFromChat(u gjson.Result) *Usage {
	if !u.IsObject() {
		return nil
	}
	out := &Usage{
		InputTokens:  u.Get("prompt_tokens").Int(),
		OutputTokens: u.Get("completion_tokens").Int(),
		TotalTokens:  u.Get("total_tokens").Int(),
	}
	out.InputTokensDetails.CachedTokens = u.Get("prompt_tokens_details.cached_tokens").Int()
	if out.InputTokensDetails.CachedTokens == 0 {
		out.InputTokensDetails.CachedTokens = u.Get("cache_read_input_tokens").Int()
	}
	out.InputTokensDetails.CacheWriteTokens = u.Get("cache_creation_input_tokens").Int()
	out.OutputTokensDetails.ReasoningTokens = u.Get("completion_tokens_details.reasoning_tokens").Int()
	if out.TotalTokens == 0 {
		out.TotalTokens = out.InputTokens + out.OutputTokens
	}
	return out
}
