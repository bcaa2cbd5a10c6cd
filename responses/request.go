package responses

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Item is one conversation item in its Responses wire form (a message,
// function_call, function_call_output, reasoning item …), kept as JSON so
// stored and replayed items round-trip unchanged.
type Item = json.RawMessage

// Request is a parsed, bounds-checked Responses create body. Fields keep
// the client's values for the echo in the Response object; Input holds
// the input normalised to items, each with an id.
type Request struct {
	Model              string            `json:"model"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	Include            []string          `json:"include"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	MaxToolCalls       *int64            `json:"max_tool_calls"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	TopLogprobs        *int64            `json:"top_logprobs"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Text               json.RawMessage   `json:"text"`
	Reasoning          json.RawMessage   `json:"reasoning"`
	Truncation         string            `json:"truncation"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`
	SafetyIdentifier   string            `json:"safety_identifier"`
	PromptCacheKey     string            `json:"prompt_cache_key"`
	ServiceTier        string            `json:"service_tier"`
	ConversationParam  json.RawMessage   `json:"conversation"`
	Prompt             json.RawMessage   `json:"prompt"`
	RawInput           json.RawMessage   `json:"input"`

	// Input is RawInput as items, ids assigned (filled by Parse).
	Input []Item `json:"-"`
	// ID and CreatedAt identify the response this request produces;
	// Parse sets them, tests may replace them.
	ID        string `json:"-"`
	CreatedAt int64  `json:"-"`
	// NewID makes item ids ("msg_", "fc_", "rs_" …); Parse sets a random
	// generator, golden tests a deterministic one.
	NewID func(prefix string) string `json:"-"`
	// Now gives completed_at; nil means time.Now.
	Now func() time.Time `json:"-"`
}

func (r *Request) now() int64 {
	if r.Now != nil {
		return r.Now().Unix()
	}
	return time.Now().Unix()
}

// Stored reports whether the response is to be stored (store defaults to
// true).
func (r *Request) Stored() bool { return r.Store == nil || *r.Store }

// TruncationAuto reports whether the client asked for truncation "auto".
func (r *Request) TruncationAuto() bool { return r.Truncation == "auto" }

// Include values OpenAI accepts: all of OpenAI's current ones, since
// SDK-based agents send them (Codex sends reasoning.encrypted_content)
// and refusing any would break those clients.
var includeValues = []string{
	"file_search_call.results",
	"message.input_image.image_url",
	"computer_call_output.output.image_url",
	"web_search_call.action.sources",
	"web_search_call.results",
	"code_interpreter_call.outputs",
	"message.output_text.logprobs",
	"reasoning.encrypted_content",
}

var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// Metadata bounds from the spec.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// Parse reads a Responses create body and checks the gateway's bounds, for
// native and translated targets alike, before any provider call. Model
// names are not restricted.
func Parse(body []byte) (*Request, error) {
	if err := jsonlimit.Object(body); err != nil {
		return nil, apierror.BadRequest("", "invalid request body: %s", err)
	}
	r := &Request{}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, apierror.BadRequest("", "invalid request body: %s", jsonTypeError(err))
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	r.ID = NewID("resp_")
	r.NewID = ItemIDs(r.ID)
	r.CreatedAt = time.Now().Unix()
	items, err := normalizeInput(r.RawInput)
	if err != nil {
		return nil, err
	}
	r.Input = items
	r.assignIDs(r.Input)
	return r, nil
}

// jsonTypeError names the field of a type mismatch without quoting the
// Go types.
func jsonTypeError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return "wrong type for '" + te.Field + "'"
	}
	return "malformed JSON"
}

func (r *Request) validate() error {
	if r.Model == "" {
		return apierror.BadRequest("model", "Missing required parameter: 'model'.")
	}
	if len(r.RawInput) == 0 || string(r.RawInput) == "null" {
		return apierror.BadRequest("input", "Missing required parameter: 'input'.")
	}
	if len(r.Metadata) > maxMetadataPairs {
		return apierror.BadRequest("metadata", "Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got %d.", maxMetadataPairs, len(r.Metadata))
	}
	for k, v := range r.Metadata {
		if utf8.RuneCountInString(k) > maxMetadataKey {
			return apierror.BadRequest("metadata", "Invalid 'metadata': keys may be at most %d characters long.", maxMetadataKey)
		}
		if utf8.RuneCountInString(v) > maxMetadataValue {
			return apierror.BadRequest("metadata", "Invalid 'metadata': values may be at most %d characters long.", maxMetadataValue)
		}
	}
	if t := r.Temperature; t != nil && (*t < 0 || *t > 2) {
		return apierror.BadRequest("temperature", "Invalid 'temperature': must be between 0 and 2.")
	}
	if p := r.TopP; p != nil && (*p < 0 || *p > 1) {
		return apierror.BadRequest("top_p", "Invalid 'top_p': must be between 0 and 1.")
	}
	if t := r.TopLogprobs; t != nil && (*t < 0 || *t > 20) {
		return apierror.BadRequest("top_logprobs", "Invalid 'top_logprobs': must be between 0 and 20.")
	}
	if m := r.MaxOutputTokens; m != nil && *m < 16 {
		return apierror.BadRequest("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *m)
	}
	if m := r.MaxToolCalls; m != nil && *m < 1 {
		return apierror.BadRequest("max_tool_calls", "Invalid 'max_tool_calls': must be at least 1.")
	}
	switch r.Truncation {
	case "", "auto", "disabled":
	default:
		return apierror.BadRequest("truncation", "Invalid value for 'truncation': must be 'auto' or 'disabled'.")
	}
	for _, inc := range r.Include {
		if !slices.Contains(includeValues, inc) {
			return apierror.BadRequest("include", "Invalid value for 'include': %q is not supported.", inc)
		}
	}
	if len(r.Reasoning) > 0 && string(r.Reasoning) != "null" {
		e := gjson.GetBytes(r.Reasoning, "effort")
		if e.Exists() && e.Type != gjson.Null && !slices.Contains(reasoningEfforts, e.String()) {
			return apierror.BadRequest("reasoning.effort", "Invalid value for 'reasoning.effort': %q.", e.String())
		}
	}
	if r.PreviousResponseID != "" && len(r.ConversationParam) > 0 && string(r.ConversationParam) != "null" {
		return apierror.BadRequest("previous_response_id", "'previous_response_id' cannot be used in conjunction with 'conversation'.")
	}
	return nil
}

// NewID returns prefix followed by 48 random hex digits, the shape of
// OpenAI's ids.
func NewID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, len(prefix)+48)
	copy(out, prefix)
	hex.Encode(out[len(prefix):], b[:])
	return string(out)
}

// ItemIDs returns the item id generator of response id: item ids embed
// the response's random part and a counter ("msg_<hex>_3"), so an
// item_reference can be resolved to the stored response that holds the
// item without a separate index.
func ItemIDs(responseID string) func(prefix string) string {
	n := 0
	part := strings.TrimPrefix(responseID, "resp_")
	return func(prefix string) string {
		n++
		return prefix + part + "_" + strconv.Itoa(n)
	}
}

// responseOfItem returns the id of the response whose ItemIDs made
// itemID, or "".
func responseOfItem(itemID string) string {
	_, rest, ok := strings.Cut(itemID, "_")
	if !ok {
		return ""
	}
	hexPart, n, ok := strings.Cut(rest, "_")
	if !ok || len(hexPart) != 48 || n == "" {
		return ""
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return ""
	}
	return "resp_" + hexPart
}

// normalizeInput turns the input (a string or an item array) into items:
// a string becomes one user message, and a message whose content is a
// string gets a one-part content array, as OpenAI lists them in
// input_items.
func normalizeInput(raw json.RawMessage) ([]Item, error) {
	in := gjson.ParseBytes(raw)
	switch {
	case in.Type == gjson.String:
		return []Item{textMessage("user", in.Str)}, nil
	case in.IsArray():
	default:
		return nil, apierror.BadRequest("input", "Invalid type for 'input': expected a string or an array of input items.")
	}
	arr := in.Array()
	items := make([]Item, 0, len(arr))
	for i, it := range arr {
		if !it.IsObject() {
			return nil, apierror.BadRequest("input", "Invalid type for 'input[%d]': expected an object.", i)
		}
		typ := it.Get("type").String()
		if typ == "" && it.Get("role").Exists() {
			typ = "message"
		}
		if typ == "" {
			return nil, apierror.BadRequest("input", "Missing required parameter: 'input[%d].type'.", i)
		}
		if typ != "message" {
			items = append(items, Item(it.Raw))
			continue
		}
		role := it.Get("role").String()
		switch role {
		case "user", "assistant", "system", "developer":
		default:
			return nil, apierror.BadRequest("input", "Invalid value for 'input[%d].role': %q.", i, role)
		}
		c := it.Get("content")
		switch {
		case c.Type == gjson.String:
			part := "input_text"
			if role == "assistant" {
				part = "output_text"
			}
			m := message{Type: "message", Role: role, ID: it.Get("id").String(), Status: it.Get("status").String()}
			m.Content = []json.RawMessage{textPart(part, c.Str)}
			items = append(items, mustJSON(m))
		case c.IsArray():
			if it.Get("type").Exists() {
				items = append(items, Item(it.Raw))
			} else {
				items = append(items, setType(it.Raw))
			}
		default:
			return nil, apierror.BadRequest("input", "Invalid type for 'input[%d].content': expected a string or an array.", i)
		}
	}
	return items, nil
}

// message is an input or output message item.
type message struct {
	Type    string            `json:"type"`
	ID      string            `json:"id,omitempty"`
	Status  string            `json:"status,omitempty"`
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

func textMessage(role, text string) Item {
	return mustJSON(message{Type: "message", Role: role, Content: []json.RawMessage{textPart("input_text", text)}})
}

func textPart(typ, text string) json.RawMessage {
	return mustJSON(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{typ, text})
}

// setType adds "type":"message" to an easy input message object.
func setType(raw string) Item {
	out := make([]byte, 0, len(raw)+20)
	out = append(out, `{"type":"message",`...)
	rest := raw[1:]
	// An empty object cannot be a message with content; raw has content.
	out = append(out, rest...)
	return out
}

// assignIDs gives every message, function call and function call output
// without an id one, so input_items can list them and item_reference can
// find them.
func (r *Request) assignIDs(items []Item) {
	for i, it := range items {
		if gjson.GetBytes(it, "id").String() != "" {
			continue
		}
		var prefix string
		switch gjson.GetBytes(it, "type").String() {
		case "message":
			prefix = "msg_"
		case "function_call":
			prefix = "fc_"
		case "function_call_output":
			prefix = "fco_"
		default:
			continue
		}
		items[i] = withID(it, r.NewID(prefix))
	}
}

// withID returns item with "id" set as its first member.
func withID(item Item, id string) Item {
	idJSON, _ := json.Marshal(id)
	out := make([]byte, 0, len(item)+len(idJSON)+8)
	out = append(out, `{"id":`...)
	out = append(out, idJSON...)
	if len(item) > 2 {
		out = append(out, ',')
	}
	return append(out, item[1:]...)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only gateway-built values reach here
	}
	return b
}
