package responses

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// DropOldest shortens a conversation for truncation "auto": it drops the
// older half of the items before the last user message, then keeps
// dropping until the first kept item is a user message, so no tool
// output or call is left without its partner. System and developer
// messages are kept wherever they are (they act as instructions;
// instructions themselves are never items). ok is false when nothing can
// be dropped, and the caller should answer with the overflow error.
func DropOldest(items []Item) ([]Item, bool) {
	last := -1
	for i := len(items) - 1; i >= 0; i-- {
		if isRole(items[i], "user") {
			last = i
			break
		}
	}
	if last <= 0 {
		return items, false
	}
	cut := (last + 1) / 2
	for cut < last && !isRole(items[cut], "user") {
		cut++
	}
	out := make([]Item, 0, len(items)-cut+2)
	for _, it := range items[:cut] {
		if isRole(it, "system") || isRole(it, "developer") {
			out = append(out, it)
		}
	}
	if len(out) == cut {
		return items, false // only system messages before the cut
	}
	return append(out, items[cut:]...), true
}

func isRole(it Item, role string) bool {
	r := gjson.GetManyBytes(it, "type", "role")
	return (r[0].Str == "message" || r[0].Str == "") && r[1].Str == role
}

// overflowPhrases are how providers word a context overflow, lower-cased,
// as their errors reach the gateway inside the OpenAI envelope.
var overflowPhrases = []string{
	"context_length_exceeded",              // OpenAI code
	"maximum context length",               // OpenAI, vLLM, Mistral
	"context window",                       // OpenAI Responses, several servers
	"prompt is too long",                   // Anthropic
	"input is too long",                    // Bedrock
	"too many input tokens",                // Bedrock
	"input token count",                    // Gemini: "The input token count (N) exceeds the maximum …"
	"exceeds the maximum number of tokens", // Gemini
	"too many tokens",                      // Cohere
	"exceed context limit",                 // Anthropic: input + max_tokens
	"input length exceeds",                 // Bedrock model errors
	"context length",                       // generic
	"reduce the length of the messages",
}

// IsContextOverflow reports whether a provider error (status and the
// OpenAI-envelope body the gateway forwards) says the input is larger
// than the model's context window.
func IsContextOverflow(status int, body []byte) bool {
	if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge && status != http.StatusUnprocessableEntity {
		return false
	}
	e := gjson.GetManyBytes(body, "error.code", "error.message", "message", "error")
	if e[0].Str == "context_length_exceeded" {
		return true
	}
	msg := e[1].Str
	if msg == "" {
		msg = e[2].Str
	}
	if msg == "" && e[3].Type == gjson.String {
		msg = e[3].Str
	}
	msg = strings.ToLower(msg)
	for _, p := range overflowPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// OverflowError is the 400 for a context overflow with truncation
// "disabled", or when "auto" could not drop enough.
func OverflowError() *apierror.Error {
	return apierror.BadRequest("input", "Your input exceeds the context window of this model. Please adjust your input and try again, or set 'truncation' to 'auto'.").WithCode("context_length_exceeded")
}
