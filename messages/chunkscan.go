package messages

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/byteview"
)

// chunkView is what the stream writer takes from one chat chunk, however
// it was read: by scanChunk, the one-pass reader of the usual chunk, or
// by the gjson walk that reads any other (StreamWriter.gjsonChunk). Its
// strings may share the chunk's memory or the writer's scratch buffer:
// they are used before the event returns and never kept.
type chunkView struct {
	id, model string
	// usage is the raw usage object, when the chunk had one.
	usage    []byte
	hasUsage bool
	// choice reports a first choice that is an object; the fields below
	// are its and its delta's.
	choice             bool
	content, reasoning string
	finish, matched    string
	// tools is the delta's tool_calls as the gjson walk found them;
	// calls[:ncalls] are those scanChunk read.
	tools  gjson.Result
	calls  [maxScanCalls]toolCall
	ncalls int
}

// toolCall is one chat tool call fragment: its index, and its id,
// function name and arguments ("" when absent or null).
type toolCall struct {
	index          int64
	id, name, args string
}

// maxScanCalls bounds the tool call fragments scanChunk reads from one
// chunk (providers send one, or one per parallel call in a first chunk);
// a chunk with more is left to the gjson walk.
const maxScanCalls = 4

// chunkScan reads the chunk of an OpenAI chat stream in the shape every
// provider sends almost every time,
//
//	{"id":…,"object":"chat.completion.chunk","created":…,"model":…,
//	 "choices":[{"index":0,"delta":{"content":"…"},"finish_reason":null}]}
//
// (or a tool call fragment in the delta), members in any order, others
// (system_fingerprint, usage, logprobs, …) skipped, in one pass and
// without a gjson.Result per member: a chunk is read for every token a
// translated stream carries, and the gjson walk cost most of the
// writer's time. It accepts strict JSON only, and reports false for
// anything it does not take on (an error, more than one choice, more
// than four tool call fragments, a tool call index other than plain
// digits, a member the writer reads given twice, an escaped member
// name, a value of an unexpected type, malformed JSON), before the writer
// did anything with the chunk: the gjson walk then reads it, so the two
// agree on every chunk this one takes (FuzzChunkScan and
// TestChunkScanEscapesMatchGJSON hold them to the same output).
type chunkScan struct {
	b []byte
	i int
	// tmp holds the chunk's unescaped strings, one after another: a
	// string made from it stays valid until the next chunk (growing tmp
	// leaves the earlier strings in the old array, unchanged).
	tmp []byte
}

// maxScanDepth bounds the nesting of a skipped value the scanner walks;
// a deeper one is left to gjson, which walks without recursion.
const maxScanDepth = 16

// scan reads data (trimmed) into v.
func (r *chunkScan) scan(data []byte, v *chunkView) bool {
	r.b, r.i, r.tmp = data, 0, r.tmp[:0]
	if !r.top(v) {
		return false
	}
	r.ws()
	return r.i == len(r.b)
}

// Member bits: a member the writer reads may appear once.
const (
	seenID = 1 << iota
	seenModel
	seenChoices
	seenUsage
	seenDelta
	seenFinish
	seenContent
	seenTools
	seenIndex
	seenFunction
	seenName
	seenArguments
)

// top reads the chunk object.
func (r *chunkScan) top(v *chunkView) bool {
	var seen uint
	return r.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return r.once(&seen, seenID) && r.nullableString(&v.id)
		case "model":
			return r.once(&seen, seenModel) && r.nullableString(&v.model)
		case "choices":
			return r.once(&seen, seenChoices) && r.choices(v)
		case "usage":
			if !r.once(&seen, seenUsage) {
				return false
			}
			start := r.i
			if r.i < len(r.b) && r.b[r.i] == '{' {
				if !r.skip(0) {
					return false
				}
				v.usage, v.hasUsage = r.b[start:r.i], true
				return true
			}
			return r.skip(0)
		case "error":
			return false
		}
		return r.skip(0)
	})
}

// choices reads an array of at most one choice object.
func (r *chunkScan) choices(v *chunkView) bool {
	if !r.lit('[') {
		return false
	}
	r.ws()
	if r.lit(']') {
		return true
	}
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return false
	}
	v.choice = true
	var seen uint
	ok := r.object(func(key []byte) bool {
		switch string(key) {
		case "delta":
			return r.once(&seen, seenDelta) && r.delta(v)
		case "finish_reason":
			return r.once(&seen, seenFinish) && r.nullableString(&v.finish)
		case "stop_reason", "matched_stop":
			// The last string of the two names wins, as in the walk.
			return r.stringOrSkip(&v.matched)
		}
		return r.skip(0)
	})
	if !ok {
		return false
	}
	r.ws()
	return r.lit(']')
}

// delta reads a choice's delta: an object or null.
func (r *chunkScan) delta(v *chunkView) bool {
	if r.null() {
		return true
	}
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return false
	}
	var seen uint
	return r.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return r.once(&seen, seenContent) && r.nullableString(&v.content)
		case "reasoning_content", "reasoning":
			// The walk keeps the last non-empty string of the two.
			var s string
			if !r.stringOrSkip(&s) {
				return false
			}
			if s != "" {
				v.reasoning = s
			}
			return true
		case "tool_calls":
			return r.once(&seen, seenTools) && (r.null() || r.toolCalls(v))
		}
		return r.skip(0)
	})
}

// toolCalls reads a delta's tool_calls array: objects only, with an
// index of plain digits.
func (r *chunkScan) toolCalls(v *chunkView) bool {
	if !r.lit('[') {
		return false
	}
	r.ws()
	if r.lit(']') {
		return true
	}
	for {
		if v.ncalls == maxScanCalls || r.i >= len(r.b) || r.b[r.i] != '{' {
			return false
		}
		t := &v.calls[v.ncalls]
		v.ncalls++
		var seen uint
		ok := r.object(func(key []byte) bool {
			switch string(key) {
			case "index":
				return r.once(&seen, seenIndex) && r.index(&t.index)
			case "id":
				return r.once(&seen, seenID) && r.nullableString(&t.id)
			case "function":
				return r.once(&seen, seenFunction) && (r.null() || r.function(t))
			}
			return r.skip(0)
		})
		if !ok {
			return false
		}
		r.ws()
		if r.lit(']') {
			return true
		}
		if !r.lit(',') {
			return false
		}
		r.ws()
	}
}

// function reads a tool call's function object.
func (r *chunkScan) function(t *toolCall) bool {
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return false
	}
	var seen uint
	return r.object(func(key []byte) bool {
		switch string(key) {
		case "name":
			return r.once(&seen, seenName) && r.nullableString(&t.name)
		case "arguments":
			return r.once(&seen, seenArguments) && r.nullableString(&t.args)
		}
		return r.skip(0)
	})
}

// index reads a tool call's index: 0 or digits without a leading zero,
// at most nine of them, so it reads as gjson's Int reads it.
func (r *chunkScan) index(n *int64) bool {
	b, i := r.b, r.i
	if i < len(b) && b[i] == '0' {
		i++
	} else {
		for i < len(b) && i-r.i < 9 && b[i] >= '0' && b[i] <= '9' {
			*n = *n*10 + int64(b[i]-'0')
			i++
		}
		if i == r.i {
			return false
		}
	}
	if i < len(b) {
		switch b[i] {
		case ',', '}', ' ', '\t', '\n', '\r':
		default:
			return false // more digits, a fraction or an exponent
		}
	}
	r.i = i
	return true
}

func (r *chunkScan) once(seen *uint, bit uint) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// object reads an object whose members' values member reads (r.i at the
// value, white space skipped); member names with escapes are refused.
func (r *chunkScan) object(member func(key []byte) bool) bool {
	if !r.lit('{') {
		return false
	}
	r.ws()
	if r.lit('}') {
		return true
	}
	for {
		key, ok := r.plainKey()
		if !ok {
			return false
		}
		r.ws()
		if !r.lit(':') {
			return false
		}
		r.ws()
		if !member(key) {
			return false
		}
		r.ws()
		if r.lit('}') {
			return true
		}
		if !r.lit(',') {
			return false
		}
		r.ws()
	}
}

// plainKey reads a member name without escapes.
func (r *chunkScan) plainKey() ([]byte, bool) {
	if !r.lit('"') {
		return nil, false
	}
	start := r.i
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case '"':
			r.i++
			return r.b[start : r.i-1], true
		case '\\':
			return nil, false
		}
		r.i++
	}
	return nil, false
}

// nullableString reads a string into s, or null (s stays empty).
func (r *chunkScan) nullableString(s *string) bool {
	if r.null() {
		return true
	}
	return r.str(s)
}

// stringOrSkip reads a string into s, or skips any other value.
func (r *chunkScan) stringOrSkip(s *string) bool {
	if r.i < len(r.b) && r.b[r.i] == '"' {
		return r.str(s)
	}
	return r.skip(0)
}

// str reads a string value into s: in place when it has no escapes,
// else unescaped into tmp as gjson unescapes it.
func (r *chunkScan) str(s *string) bool {
	if !r.lit('"') {
		return false
	}
	start := r.i
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case '"':
			*s = byteview.String(r.b[start:r.i])
			r.i++
			return true
		case '\\':
			return r.escaped(start, s)
		}
		r.i++
	}
	return false
}

// escaped unescapes the string that began at start; r.i is at its first
// backslash. A raw control character (anywhere in the string), an unknown escape or a \u without
// four hex digits is refused (gjson would cut the string there).
func (r *chunkScan) escaped(start int, s *string) bool {
	for _, c := range r.b[start:r.i] {
		if c < ' ' {
			return false
		}
	}
	t := len(r.tmp)
	out := append(r.tmp, r.b[start:r.i]...)
	b := r.b
	i := r.i
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			r.tmp = out
			*s = byteview.String(out[t:])
			r.i = i + 1
			return true
		case c < ' ':
			return false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return false
		}
		switch b[i+1] {
		case '"', '\\', '/':
			out = append(out, b[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			rn, ok := hex4(b, i+2)
			if !ok {
				return false
			}
			i += 6
			if utf16.IsSurrogate(rn) && i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
				lo, ok := hex4(b, i+2)
				if !ok {
					return false
				}
				rn = utf16.DecodeRune(rn, lo)
				i += 6
			}
			out = utf8.AppendRune(out, rn)
			continue
		default:
			return false
		}
		i += 2
	}
	return false
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skip passes over one value, checking it is strict JSON.
func (r *chunkScan) skip(depth int) bool {
	if r.i >= len(r.b) {
		return false
	}
	switch c := r.b[r.i]; {
	case c == '"':
		return r.skipString()
	case c == '{':
		if depth >= maxScanDepth {
			return false
		}
		return r.object(func([]byte) bool { return r.skip(depth + 1) })
	case c == '[':
		if depth >= maxScanDepth {
			return false
		}
		r.i++
		r.ws()
		if r.lit(']') {
			return true
		}
		for {
			if !r.skip(depth + 1) {
				return false
			}
			r.ws()
			if r.lit(']') {
				return true
			}
			if !r.lit(',') {
				return false
			}
			r.ws()
		}
	case c == 't':
		return r.word("true")
	case c == 'f':
		return r.word("false")
	case c == 'n':
		return r.null()
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	}
	return false
}

// skipString passes over a string, escapes checked but not decoded.
func (r *chunkScan) skipString() bool {
	r.i++
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case '"':
			r.i++
			return true
		case '\\':
			if r.i+1 >= len(r.b) {
				return false
			}
			switch r.b[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if _, ok := hex4(r.b, r.i+2); !ok {
					return false
				}
				r.i += 6
			default:
				return false
			}
			continue
		}
		r.i++
	}
	return false
}

// number passes over a number in JSON's grammar.
func (r *chunkScan) number() bool {
	b, i := r.b, r.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	r.i = i
	return true
}

func (r *chunkScan) null() bool { return r.word("null") }

// word reads the literal w, which must not run on into more letters.
func (r *chunkScan) word(w string) bool {
	if len(r.b)-r.i < len(w) || string(r.b[r.i:r.i+len(w)]) != w {
		return false
	}
	if j := r.i + len(w); j < len(r.b) && r.b[j] >= 'a' && r.b[j] <= 'z' {
		return false
	}
	r.i += len(w)
	return true
}

// lit reads the byte c.
func (r *chunkScan) lit(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// ws skips JSON's white space.
func (r *chunkScan) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}
