package oaiwire

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// ChatCompletion is an OpenAI chat.completion response.
type ChatCompletion struct {
	ID       string    `json:"id"`
	Object   string    `json:"object"`
	Created  int64     `json:"created"`
	Model    string    `json:"model"`
	Provider string    `json:"provider,omitempty"`
	Choices  []Choice  `json:"choices"`
	Usage    *UsageOut `json:"usage,omitempty"`
}

// Choice is one choice of a chat completion.
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

// ResponseMessage is the assistant message of a choice. Content is null
// when the model only called tools. ContentBlocks holds provider blocks
// (thinking with signatures) a client must send back on the next turn.
type ResponseMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ContentBlocks    any        `json:"content_blocks,omitempty"`
	Refusal          *string    `json:"refusal"`
}

// NullJSON is the JSON null, for fields OpenAI always sends.
var NullJSON = json.RawMessage("null")

// UsageOut is OpenAI's usage object. The cache_* fields are Anthropic's
// own counts, kept as Portkey does for clients that price cache writes.
type UsageOut struct {
	PromptTokens             int64          `json:"prompt_tokens"`
	CompletionTokens         int64          `json:"completion_tokens"`
	TotalTokens              int64          `json:"total_tokens"`
	PromptTokensDetails      *PromptDetails `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails  *ComplDetails  `json:"completion_tokens_details,omitempty"`
	CacheReadInputTokens     int64          `json:"cache_read_input_tokens,omitempty"`
	CacheCreationInputTokens int64          `json:"cache_creation_input_tokens,omitempty"`
}

// PromptDetails is usage.prompt_tokens_details.
type PromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// ComplDetails is usage.completion_tokens_details.
type ComplDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// UsageFrom converts the gateway's usage to OpenAI's usage object. The
// details objects are always present, as OpenAI sends them.
func UsageFrom(u *providers.Usage) *UsageOut {
	if u == nil {
		return nil
	}
	return &UsageOut{
		PromptTokens:            u.PromptTokens,
		CompletionTokens:        u.CompletionTokens,
		TotalTokens:             u.TotalTokens,
		PromptTokensDetails:     &PromptDetails{CachedTokens: u.CachedTokens},
		CompletionTokensDetails: &ComplDetails{ReasoningTokens: u.ReasoningTokens},
	}
}

// NewID returns a random id with the given prefix, for providers whose
// responses carry none.
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// StrPtr returns a pointer to s.
func StrPtr(s string) *string { return &s }
