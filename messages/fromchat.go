package messages

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Response is a Messages API answer.
type Response struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []OutBlock `json:"content"`
	StopReason   string     `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        Usage      `json:"usage"`
}

// OutBlock is a content block of an answer.
type OutBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// Usage is the Messages API usage object.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// UsageOf is the Messages usage of the gateway's: Anthropic's
// input_tokens leaves out the tokens read from and written to the prompt
// cache, which OpenAI's prompt_tokens includes.
func UsageOf(u *providers.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	in := u.PromptTokens - u.CachedTokens - u.CacheWriteTokens
	if in < 0 {
		in = 0
	}
	return Usage{InputTokens: in, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedTokens, CacheCreationInputTokens: u.CacheWriteTokens}
}

// StopReason maps a chat finish_reason to Anthropic's stop_reason.
func StopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// MatchedStop is the stop sequence a provider said it stopped at
// (matched), when it is one of the request's stops; "" otherwise, for a
// provider that does not say and for anything not asked for.
func MatchedStop(matched string, stops []string) string {
	if matched == "" {
		return ""
	}
	for _, s := range stops {
		if s == matched {
			return s
		}
	}
	return ""
}

// appendStopSequence appends seq as a JSON string, or null when empty.
func appendStopSequence(b []byte, seq string) []byte {
	if seq == "" {
		return append(b, "null"...)
	}
	return oaiwire.AppendString(b, seq)
}

// MessageID makes an Anthropic-style id of a chat completion's id.
func MessageID(chatID string) string {
	if strings.HasPrefix(chatID, "msg_") {
		return chatID
	}
	if chatID == "" {
		return oaiwire.NewID("msg_")
	}
	return "msg_" + chatID
}

// FromChat translates a complete chat completion into a Messages answer
// for a request for model (the client's model when the answer names
// none) with stop_sequences stops. The first choice is the answer:
// Messages has no n. The answer is read in one pass per level (it is
// read for every translated answer) and written without reflection.
//
// OpenAI's format strips a matched stop sequence and says only
// finish_reason "stop", which is also what a natural end says: such an
// answer is end_turn with a null stop_sequence (as LiteLLM answers),
// unless the provider names the sequence that matched (vLLM's
// choices[].stop_reason, SGLang's matched_stop) and it is one of stops;
// then it is stop_sequence with that sequence. A token id there (the
// model's own end token) is not a stop sequence.
func FromChat(chat []byte, model string, stops []string) ([]byte, error) {
	if err := jsonlimit.Object(chat); err != nil {
		return nil, err
	}
	var id, choice, usage gjson.Result
	gjson.ParseBytes(chat).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			id = v
		case "model":
			if v.Str != "" {
				model = v.Str
			}
		case "choices":
			choice = v.Get("0")
		case "usage":
			usage = v
		}
		return true
	})
	if !choice.IsObject() {
		return nil, errNoChoice
	}
	var msg, finish, matched gjson.Result
	choice.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "message":
			msg = v
		case "finish_reason":
			finish = v
		case "stop_reason", "matched_stop":
			if v.Type == gjson.String {
				matched = v
			}
		}
		return true
	})
	var content, thinking, refusal, tools gjson.Result
	msg.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "content":
			content = v
		case "reasoning_content", "reasoning":
			if v.Str != "" {
				thinking = v
			}
		case "refusal":
			refusal = v
		case "tool_calls":
			tools = v
		}
		return true
	})
	b := make([]byte, 0, 256+len(chat))
	b = append(b, `{"id":`...)
	b = oaiwire.AppendString(b, MessageID(id.Str))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = oaiwire.AppendString(b, model)
	b = append(b, `,"content":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	if thinking.Str != "" {
		// A chat target's reasoning has no signature to send back; an
		// empty one tells the client so.
		sep()
		b = append(b, `{"type":"thinking","thinking":`...)
		b = oaiwire.AppendString(b, thinking.Str)
		b = append(b, `,"signature":""}`...)
	}
	text := content.Str
	if text == "" {
		text = refusal.Str
	}
	ntools := 0
	if tools.IsArray() {
		ntools = len(tools.Array())
	}
	if text != "" || ntools == 0 {
		sep()
		b = append(b, `{"type":"text","text":`...)
		b = oaiwire.AppendString(b, text)
		b = append(b, '}')
	}
	if ntools > 0 {
		tools.ForEach(func(_, tc gjson.Result) bool {
			sep()
			b = append(b, `{"type":"tool_use","id":`...)
			b = oaiwire.AppendString(b, tc.Get("id").Str)
			b = append(b, `,"name":`...)
			b = oaiwire.AppendString(b, tc.Get("function.name").Str)
			b = append(b, `,"input":`...)
			b = append(b, compactJSON(ToolInput(tc.Get("function.arguments").Str))...)
			b = append(b, '}')
			return true
		})
	}
	stop, seq := StopReason(finish.Str), ""
	if refusal.Str != "" {
		stop = "refusal"
	} else if finish.Str == "stop" {
		if seq = MatchedStop(matched.Str, stops); seq != "" {
			stop = "stop_sequence"
		}
	}
	b = append(b, `],"stop_reason":`...)
	b = oaiwire.AppendString(b, stop)
	u := Usage{}
	if usage.IsObject() {
		u = UsageOf(chatUsage([]byte(usage.Raw)))
	}
	b = appendStopSequence(append(b, `,"stop_sequence":`...), seq)
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheCreationInputTokens, 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheReadInputTokens, 10)
	return append(b, "}}"...), nil
}

// compactJSON is raw without insignificant whitespace (a model's
// arguments are often pretty-printed).
func compactJSON(raw []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// ToolInput is a tool call's arguments as the tool_use input object: the
// arguments when they are a JSON object, an empty object when there are
// none, and otherwise the raw text kept under "arguments" so nothing the
// model said is lost.
func ToolInput(args string) json.RawMessage {
	a := strings.TrimSpace(args)
	if a == "" {
		return json.RawMessage("{}")
	}
	if a[0] == '{' && json.Valid([]byte(a)) {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(map[string]string{"arguments": args})
	return b
}

// errNoChoice is the error of a chat answer without a choice.
var errNoChoice = errorString("the provider's answer has no choices")

type errorString string

func (e errorString) Error() string { return string(e) }
