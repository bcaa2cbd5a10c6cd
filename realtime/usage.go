package realtime

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/byteview"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Usage is one response's usage as a realtime provider reports it in
// response.done: tokens by modality, since audio costs several times
// text.
type Usage struct {
	// Tokens is the usage in the gateway's usual terms: prompt
	// (input) and completion (output) tokens, cached input tokens.
	Tokens providers.Usage
	// InputText, InputAudio, OutputText and OutputAudio split the
	// input and output tokens by modality; CachedText and CachedAudio
	// split the cached input tokens.
	InputText, InputAudio   int64
	OutputText, OutputAudio int64
	CachedText, CachedAudio int64
}

// Add adds u's counts to t's.
func (t *Usage) Add(u *Usage) {
	t.Tokens.PromptTokens += u.Tokens.PromptTokens
	t.Tokens.CompletionTokens += u.Tokens.CompletionTokens
	t.Tokens.TotalTokens += u.Tokens.TotalTokens
	t.Tokens.CachedTokens += u.Tokens.CachedTokens
	t.InputText += u.InputText
	t.InputAudio += u.InputAudio
	t.OutputText += u.OutputText
	t.OutputAudio += u.OutputAudio
	t.CachedText += u.CachedText
	t.CachedAudio += u.CachedAudio
}

// Done is what a response.done event says of its response.
type Done struct {
	// ID and Status are the response's (completed, cancelled,
	// incomplete, failed).
	ID, Status string
	// Usage is nil when the event carries none.
	Usage *Usage
}

// ParseDone reads a response.done event. The event decides a charge,
// so it is read strictly (jsonlimit): an event with a repeated member,
// which two JSON readers could read two ways, is refused (ok false).
//
// The usage shape is OpenAI's (GA and beta alike):
//
//	{"type":"response.done","response":{"id":…,"status":…,"usage":{
//	  "total_tokens":…,"input_tokens":…,"output_tokens":…,
//	  "input_token_details":{"text_tokens":…,"audio_tokens":…,"cached_tokens":…,
//	    "cached_tokens_details":{"text_tokens":…,"audio_tokens":…}},
//	  "output_token_details":{"text_tokens":…,"audio_tokens":…}}}}
func ParseDone(msg []byte) (Done, bool) {
	if jsonlimit.Check(msg) != nil || jsonlimit.CheckFold(msg) != nil {
		return Done{}, false
	}
	resp := gjson.GetBytes(msg, "response")
	d := Done{ID: resp.Get("id").Str, Status: resp.Get("status").Str}
	u := resp.Get("usage")
	if !u.IsObject() {
		return d, true
	}
	num := func(path string) int64 { return max(u.Get(path).Int(), 0) }
	x := &Usage{}
	x.Tokens.PromptTokens = num("input_tokens")
	x.Tokens.CompletionTokens = num("output_tokens")
	x.Tokens.TotalTokens = num("total_tokens")
	if x.Tokens.TotalTokens == 0 {
		x.Tokens.TotalTokens = x.Tokens.PromptTokens + x.Tokens.CompletionTokens
	}
	x.Tokens.CachedTokens = num("input_token_details.cached_tokens")
	x.InputText = num("input_token_details.text_tokens")
	x.InputAudio = num("input_token_details.audio_tokens")
	x.CachedText = num("input_token_details.cached_tokens_details.text_tokens")
	x.CachedAudio = num("input_token_details.cached_tokens_details.audio_tokens")
	x.OutputText = num("output_token_details.text_tokens")
	x.OutputAudio = num("output_token_details.audio_tokens")
	d.Usage = x
	return d, true
}

// eventType returns the "type" member of an event, read as a decoder
// reads it (an escaped name or value is decoded), without a copy in the
// usual case: the relay compares it and keeps nothing of it. The
// search skips string values with a vector search (jsonlimit.Member),
// so the base64 of an audio delta costs little when it precedes the
// type. Only events the relay acts on are read strictly (ParseDone).
func eventType(msg []byte) string { return stringMember(msg, "type") }

// stringMember returns the string member name of the object obj, not a
// copy when it has no escapes; "" when it has none or it is no string.
func stringMember(obj []byte, name string) string {
	raw, ok := jsonlimit.Member(obj, name)
	if !ok || len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return byteview.String(s)
	}
	v, _ := jsonlimit.String(raw)
	return v
}
