package handlers

import (
	"bytes"
	"io"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sse"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

var (
	sseDone      = []byte("[DONE]")
	sseDoneEvent = []byte("data: [DONE]")
)

// sseFilter passes an OpenAI-format event stream through event by event,
// byte for byte, noting the usage chunk and the final [DONE]. When the
// gateway itself asked the provider for usage, it drops the usage-only
// chunk the client did not ask for. Events are cut by the gateway's one
// splitter (LF, CRLF and CR line endings alike), which buffers at most
// one incomplete event.
type sseFilter struct {
	w          io.Writer
	split      sse.Splitter
	dropUsage  bool
	sawDone    bool
	sawAny     bool
	usage      *providers.Usage
	writeError error
	// onDone, when set, runs as [DONE] is seen, before it is written.
	onDone func()
	// each is f.event bound once, so feeding costs no allocation.
	each sse.Func
	// out gathers the kept events of one Write, so the client gets one
	// write per upstream read (as plain reverse_proxy gives it) rather
	// than one per event through every writer layer; past outBatch
	// bytes it is written at once.
	out []byte
	// src is the Write's input. While direct holds, every event so far
	// was cut from src alone and kept, so the kept bytes are src's
	// first directLen bytes, written without a copy (the usual read:
	// whole events, none dropped).
	src       []byte
	direct    bool
	directLen int
}

// outBatch bounds the kept events gathered before they are written.
const outBatch = 32 << 10

func (f *sseFilter) Write(p []byte) (int, error) {
	if f.writeError != nil {
		return 0, f.writeError
	}
	if f.each == nil {
		f.each = f.event
	}
	f.src, f.direct, f.directLen = p, f.split.Buffered() == 0, 0
	err := f.split.Feed(p, f.each)
	direct := f.direct
	f.src, f.direct = nil, false
	if err != nil {
		f.writeError = err
		return 0, err
	}
	if direct && f.directLen > 0 && f.writeError == nil {
		if _, err := f.w.Write(p[:f.directLen]); err != nil {
			f.writeError = err
		}
	}
	f.flushOut()
	if f.writeError != nil {
		return 0, f.writeError
	}
	return len(p), nil
}

// event gathers one complete event for the client unless it is dropped.
func (f *sseFilter) event(ev *sse.Event) bool {
	kept := f.keep(ev)
	if f.direct {
		if kept && (len(ev.Raw) == 0 || f.directLen < len(f.src) && &ev.Raw[0] == &f.src[f.directLen]) {
			f.directLen += len(ev.Raw)
			return true
		}
		// A dropped event, or one not next in src: from here on the
		// kept events are copied.
		f.out = append(f.out, f.src[:f.directLen]...)
		f.direct = false
	}
	if !kept {
		return true
	}
	f.out = append(f.out, ev.Raw...)
	if len(f.out) >= outBatch {
		f.flushOut()
	}
	return f.writeError == nil
}

// flushOut writes the gathered events.
func (f *sseFilter) flushOut() {
	if len(f.out) == 0 || f.writeError != nil {
		return
	}
	if _, err := f.w.Write(f.out); err != nil {
		f.writeError = err
	}
	f.out = f.out[:0]
}

// keep inspects one complete event and reports whether it goes to the
// client.
func (f *sseFilter) keep(ev *sse.Event) bool {
	f.sawAny = true
	if !ev.HasData {
		return true
	}
	payload := bytes.TrimSpace(ev.Data)
	if bytes.Equal(payload, sseDone) {
		f.sawDone = true
		if f.onDone != nil {
			f.onDone()
		}
		return true
	}
	if !hasUsage(payload) || jsonlimit.Check(payload) != nil {
		return true
	}
	u := gjson.GetBytes(payload, "usage")
	if !u.IsObject() {
		// A native Responses stream reports usage in its terminal
		// event's response.
		if u = gjson.GetBytes(payload, "response.usage"); !u.IsObject() {
			return true
		}
	}
	f.usage = usageFromJSON(u)
	if f.dropUsage {
		if ch := gjson.GetBytes(payload, "choices"); ch.IsArray() && len(ch.Array()) == 0 {
			return false
		}
	}
	return true
}

// usageKey is how a usage member begins; inside a JSON string a quote is
// escaped, so the text can only be a member name or a whole string value.
var usageKey = []byte(`"usage"`)

// hasUsage reports whether payload may carry a usage object: a "usage"
// member whose value is not null. OpenAI sends "usage":null in every chunk
// of a stream that asked for usage, so this spares each of them a check
// and two lookups; the last chunk's object still gets both.
func hasUsage(payload []byte) bool {
	for {
		i := bytes.Index(payload, usageKey)
		if i < 0 {
			return false
		}
		payload = payload[i+len(usageKey):]
		rest := bytes.TrimLeft(payload, " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue // a string value "usage", not a member
		}
		if !bytes.HasPrefix(bytes.TrimLeft(rest[1:], " \t\r\n"), []byte("null")) {
			return true
		}
	}
}

// Flush ends the stream: a trailing event that lacked its blank line is
// written when it is whole ([DONE], or data that is JSON), any but [DONE]
// with the blank line added, so the error event that follows a stream
// without [DONE] is an event of its own; half an event (the body ended
// in the middle of one) is dropped, never glued to what follows.
func (f *sseFilter) Flush() error {
	f.split.End(f.last)
	f.flushOut()
	return f.writeError
}

// last handles the event the splitter completes at the end of the body.
func (f *sseFilter) last(ev *sse.Event) bool {
	if !ev.HasData {
		return false
	}
	d := bytes.TrimSpace(ev.Data)
	done := bytes.Equal(d, sseDone)
	if !done && jsonlimit.Check(d) != nil {
		return false
	}
	if f.keep(ev) {
		raw := ev.Raw
		if !done {
			raw = sse.Terminate(raw)
		}
		f.out = append(f.out, raw...)
	}
	return false
}

// usageFromJSON reads OpenAI's usage object (chat, completions, embeddings
// and the Responses API's input/output naming) in one pass over its keys:
// it is read for every answer, and a path lookup per field would scan the
// object once per field.
func usageFromJSON(u gjson.Result) *providers.Usage {
	us := &providers.Usage{}
	var in, out, inCached, outReasoning int64
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens":
			us.PromptTokens = v.Int()
		case "completion_tokens":
			us.CompletionTokens = v.Int()
		case "total_tokens":
			us.TotalTokens = v.Int()
		case "prompt_tokens_details":
			us.CachedTokens = v.Get("cached_tokens").Int()
		case "completion_tokens_details":
			us.ReasoningTokens = v.Get("reasoning_tokens").Int()
		case "input_tokens":
			in = v.Int()
		case "output_tokens":
			out = v.Int()
		case "input_tokens_details":
			inCached = v.Get("cached_tokens").Int()
		case "output_tokens_details":
			outReasoning = v.Get("reasoning_tokens").Int()
		}
		return true
	})
	if us.PromptTokens == 0 && us.CompletionTokens == 0 {
		us.PromptTokens, us.CompletionTokens = in, out
		us.CachedTokens, us.ReasoningTokens = inCached, outReasoning
	}
	if us.TotalTokens == 0 {
		us.TotalTokens = us.PromptTokens + us.CompletionTokens
	}
	return us
}

// deliveredText counts the characters of generated text a streamed answer
// delivered to the client, so a stream that ends before the provider
// reports its usage (the client cancelled, the provider broke off) is
// charged an estimate of what it produced rather than its whole
// reservation (estimateBrokenStream). It is on only for streamed calls.
type deliveredText struct {
	on bool
	n  int64
	// keys are the textKeys (a bit each) counted in this stream, set
	// from its first event (streamTextKeys); 0 until then.
	keys   textKeySet
	sniffs uint8
}

// add counts the text in p, bytes on their way to the client.
func (s *deliveredText) add(p []byte) {
	if !s.on {
		return
	}
	if s.keys == 0 {
		if k := streamTextKeys(p); k != 0 {
			s.keys = k
		} else if s.sniffs++; s.sniffs >= maxSniffs {
			s.keys = allTextKeys
		}
	}
	keys := s.keys
	if keys == 0 {
		keys = allTextKeys
	}
	s.n += textChars(p, keys)
}

// textKeys are the members whose string values are generated text in
// the stream formats the gateway sends: chat deltas ("content",
// "reasoning_content", "refusal", tool call "arguments"), the Responses
// API's delta events ("delta") and Anthropic's ("text", "thinking",
// "partial_json").
var textKeys = [...]string{"content", "reasoning_content", "refusal", "arguments", "delta", "text", "thinking", "partial_json"}

// textKeySet is a set of textKeys, bit i standing for textKeys[i].
type textKeySet uint8

// Each stream format counts only its own delta members: a chat chunk
// translated from Anthropic repeats a thinking delta in content_blocks
// (counted once, as reasoning_content), and the Responses API's done
// events repeat the whole text, arguments or refusal their deltas
// carried ("text", "arguments", "refusal" of *.done), so counting every
// member of every format would count those twice or more.
const (
	chatTextKeys      textKeySet = 1<<0 | 1<<1 | 1<<2 | 1<<3
	responsesTextKeys textKeySet = 1 << 4
	anthropicTextKeys textKeySet = 1<<5 | 1<<6 | 1<<7
	allTextKeys                  = chatTextKeys | responsesTextKeys | anthropicTextKeys
	// maxSniffs is how many writes may pass without naming their format
	// before every key is counted.
	maxSniffs = 4
)

// streamTextKeys names the format of a stream from one of its writes by
// a member only its first event carries, or 0 when p shows none.
func streamTextKeys(p []byte) textKeySet {
	switch {
	case bytes.Contains(p, []byte(`"chat.completion.chunk"`)):
		return chatTextKeys
	case bytes.Contains(p, []byte(`"type":"response.`)):
		return responsesTextKeys
	case bytes.Contains(p, []byte(`"type":"message_start"`)):
		return anthropicTextKeys
	}
	return 0
}

// textChars returns the characters (runes, escapes as written) of the
// string values of the members of keys in p, in compact JSON (name,
// colon, value without spaces, as every provider streams). A value cut
// off at the end of p is counted up to there; JSON outside event data is
// never a text member's value, so the whole write can be scanned as it
// is.
func textChars(p []byte, keys textKeySet) int64 {
	var n int64
	for {
		i := bytes.IndexByte(p, ':')
		if i < 0 {
			return n
		}
		if i == 0 || i+1 >= len(p) || p[i-1] != '"' || p[i+1] != '"' {
			p = p[i+1:]
			continue
		}
		k := bytes.LastIndexByte(p[:i-1], '"')
		key := p[k+1 : i-1]
		p = p[i+2:]
		if !keys.has(key) {
			continue
		}
		end := stringEnd(p)
		n += int64(utf8.RuneCount(p[:end]))
		p = p[end:]
	}
}

// has reports whether key is one of the set's textKeys, by its length
// first: most members of a chunk are none of them.
func (ks textKeySet) has(key []byte) bool {
	switch len(key) {
	case 4, 5, 7, 8, 9, 12, 17:
	default:
		return false
	}
	for i, k := range textKeys {
		if ks&(1<<i) != 0 && string(key) == k {
			return true
		}
	}
	return false
}

// stringEnd returns the index of the quote that ends the JSON string
// whose contents start p, or len(p) when p ends first.
func stringEnd(p []byte) int {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(p)
}

// bytesPerToken is the divisor of the estimates of a broken stream: four
// characters per token, the usual rule for English with BPE tokenizers
// and the one the rate limiter reserves prompts by.
const bytesPerToken = 4

// estimateBrokenStream gives a streamed answer that ended before its
// final usage arrived (res.err says why: the client went away, the
// provider broke off, the stream could not be translated) an estimated
// usage, so it is priced, recorded and settled as what it delivered
// rather than with its whole reservation or the one output token
// Anthropic's message_start counts: the output as ceil(characters of
// generated text delivered / 4) (at least what the provider reported so
// far), and the prompt as the provider reported it (message_start's
// input and cache counts), else as the rate limiter estimates it for its
// reservation, ceil(request body bytes / 4). res.usage is the one value
// the price, the log entry, the ledger record and the rate-limit and
// budget settlement all read, so they agree. The entry is marked
// UsageEstimated (the ledger record's "estimated"). A stream that
// completed without the provider reporting usage is estimated the same
// way; a cache hit (charged nothing) and a failure before the answer
// started are not.
func (f *flight) estimateBrokenStream() {
	res, q := f.res, f.q
	if res == nil || q == nil || !q.Call.Stream || (res.usage != nil && !res.partialUsage) || !f.done ||
		f.status < 200 || f.status > 299 || cache.IsHit(res.label) {
		return
	}
	out := (f.out.text.n + bytesPerToken - 1) / bytesPerToken
	u := providers.Usage{CompletionTokens: out}
	if res.usage != nil {
		u = *res.usage
		u.CompletionTokens = max(u.CompletionTokens, out)
	}
	if u.PromptTokens == 0 {
		u.PromptTokens = (int64(len(q.Call.Body)) + bytesPerToken - 1) / bytesPerToken
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	res.usage, res.partialUsage = &u, false
	f.entry.UsageEstimated = true
}
