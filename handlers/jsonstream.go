package handlers

import (
	"errors"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// shapeStream is checkAnswer done as the answer streams past: an answer
// the gateway would hold to check, but cannot because the held-answer
// budget is spent, passes through to the client while this checks it
// in constant memory (the container stack and the usage object). Write
// fails at the first byte that makes the answer invalid, and Close when
// the answer ended incomplete or without its required member, so the
// caller can break the client's connection rather than end the answer
// cleanly.
//
// It is a push parser written here because none is at hand: the scanner
// of encoding/json that works this way is unexported, and json.Decoder
// and jsontext buffer each whole token, so a 50 MB content string would
// be held after all.
type shapeStream struct {
	op    providers.Operation
	stack []byte // open containers, '{' or '['
	st    jsonState
	err   error
	// A literal (true, false, null) in progress.
	lit    string
	litPos int
	// hex digits left of a \u escape; the bytes of a UTF-8 sequence.
	hexLeft  int
	runeBuf  [utf8.UTFMax]byte
	runeLen  int
	runeNeed int
	// The top-level member being read: its name (when short enough to
	// be one of interest) and whether its value started.
	isKey   bool
	key     []byte
	keyLong bool
	member  string
	// What the answer must have, and its usage object, captured up to
	// maxUsageJSON bytes.
	choices, data bool
	usage         []byte
	capturing     bool
	usageLong     bool
}

type jsonState uint8

const (
	stValue    jsonState = iota // a value is expected
	stObjFirst                  // after '{': a name or '}'
	stObjName                   // after ',' in an object: a name
	stColon                     // after a name: ':'
	stAfter                     // after a value: ',', a closer, or the end
	stArrFirst                  // after '[': a value or ']'
	stString                    // inside a string
	stEscape                    // after a backslash
	stHex                       // inside \uXXXX
	stRune                      // inside a multi-byte UTF-8 sequence
	stLiteral                   // inside true, false or null
	stNumMinus                  // after '-'
	stNumZero                   // after a leading 0
	stNumInt                    // in the integer digits
	stNumDot                    // after '.'
	stNumFrac                   // in the fraction digits
	stNumE                      // after 'e'
	stNumESign                  // after the exponent's sign
	stNumExp                    // in the exponent digits
	stEnd                       // the top-level value ended
)

// maxUsageJSON bounds the usage object kept from a passed-through answer.
const maxUsageJSON = 64 << 10

var errShapeInvalid = errors.New("not valid JSON")

func newShapeStream(op providers.Operation) *shapeStream {
	return &shapeStream{op: op, stack: make([]byte, 0, 16)}
}

// Write checks p, the next bytes of the answer.
func (s *shapeStream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if s.st == stString && !s.isKey && !s.capturing {
			// The bulk of an answer is string content: skip plain
			// ASCII without the state machine.
			for i < len(p) && p[i] >= 0x20 && p[i] < utf8.RuneSelf && p[i] != '"' && p[i] != '\\' {
				i++
			}
			if i == len(p) {
				break
			}
			c = p[i]
		}
		if s.capturing {
			s.captureByte(c)
		}
		if err := s.step(c); err != nil {
			s.err = err
			return i, err
		}
	}
	return len(p), nil
}

func (s *shapeStream) captureByte(c byte) {
	if s.usageLong {
		return
	}
	if len(s.usage) >= maxUsageJSON {
		s.usageLong, s.usage = true, nil
		return
	}
	s.usage = append(s.usage, c)
}

func space(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// step moves the machine one byte on.
func (s *shapeStream) step(c byte) error {
	switch s.st {
	case stValue, stArrFirst:
		if space(c) {
			return nil
		}
		if s.st == stArrFirst && c == ']' {
			return s.close(c)
		}
		return s.value(c)
	case stObjFirst, stObjName:
		switch {
		case space(c):
			return nil
		case c == '}' && s.st == stObjFirst:
			return s.close(c)
		case c == '"':
			s.st, s.isKey = stString, true
			if len(s.stack) == 1 {
				s.key, s.keyLong = s.key[:0], false
			}
			return nil
		}
		return errShapeInvalid
	case stColon:
		if space(c) {
			return nil
		}
		if c != ':' {
			return errShapeInvalid
		}
		s.st = stValue
		return nil
	case stAfter:
		return s.after(c)
	case stString:
		return s.str(c)
	case stEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.st = stString
		case 'u':
			s.st, s.hexLeft = stHex, 4
		default:
			return errShapeInvalid
		}
		return nil
	case stHex:
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return errShapeInvalid
		}
		if s.hexLeft--; s.hexLeft == 0 {
			s.st = stString
		}
		return nil
	case stRune:
		s.runeBuf[s.runeLen] = c
		s.runeLen++
		if s.runeLen == s.runeNeed {
			if !utf8.Valid(s.runeBuf[:s.runeLen]) {
				return jsonlimit.ErrInvalidUTF8
			}
			s.st = stString
		}
		return nil
	case stLiteral:
		if c != s.lit[s.litPos] {
			return errShapeInvalid
		}
		if s.litPos++; s.litPos == len(s.lit) {
			s.st = stAfter
		}
		return nil
	case stEnd:
		if space(c) {
			return nil
		}
		return errShapeInvalid
	}
	return s.number(c)
}

// value starts the value c opens.
func (s *shapeStream) value(c byte) error {
	if len(s.stack) == 1 && s.member != "" {
		// The value of a top-level member begins.
		switch s.member {
		case "choices":
			s.choices = c == '['
		case "data":
			s.data = c == '['
		case "usage":
			if c == '{' {
				s.capturing, s.usage, s.usageLong = true, append(s.usage[:0], c), false
			}
		}
		s.member = ""
	}
	switch c {
	case '{', '[':
		if len(s.stack) >= jsonlimit.MaxDepth {
			return jsonlimit.ErrTooDeep
		}
		s.stack = append(s.stack, c)
		if c == '{' {
			s.st = stObjFirst
		} else {
			s.st = stArrFirst
		}
	case '"':
		s.st, s.isKey = stString, false
	case 't':
		s.st, s.lit, s.litPos = stLiteral, "true", 1
	case 'f':
		s.st, s.lit, s.litPos = stLiteral, "false", 1
	case 'n':
		s.st, s.lit, s.litPos = stLiteral, "null", 1
	case '-':
		s.st = stNumMinus
	case '0':
		s.st = stNumZero
	default:
		if c < '1' || c > '9' {
			return errShapeInvalid
		}
		s.st = stNumInt
	}
	if len(s.stack) == 0 && c != '{' {
		return jsonlimit.ErrNotObject
	}
	return nil
}

// close ends the innermost container with c.
func (s *shapeStream) close(c byte) error {
	top := s.stack[len(s.stack)-1]
	if (top == '{') != (c == '}') {
		return errShapeInvalid
	}
	s.stack = s.stack[:len(s.stack)-1]
	if s.capturing && len(s.stack) == 1 {
		s.capturing = false
	}
	s.st = stAfter
	if len(s.stack) == 0 {
		s.st = stEnd
	}
	return nil
}

// after handles c after a complete value.
func (s *shapeStream) after(c byte) error {
	switch {
	case space(c):
		return nil
	case c == ',':
		if s.stack[len(s.stack)-1] == '{' {
			s.st = stObjName
		} else {
			s.st = stValue
		}
		return nil
	case c == '}' || c == ']':
		return s.close(c)
	}
	return errShapeInvalid
}

// str handles c inside a string.
func (s *shapeStream) str(c byte) error {
	switch {
	case c == '"':
		if s.isKey {
			s.st = stColon
			if len(s.stack) == 1 && !s.keyLong {
				s.member = string(s.key)
			}
			return nil
		}
		s.st = stAfter
		return nil
	case c == '\\':
		s.st = stEscape
		s.keyLong = true // an escaped name is none of interest
		return nil
	case c < 0x20:
		return errShapeInvalid
	case c >= utf8.RuneSelf:
		need := 0
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 2
		case c >= 0xE0 && c <= 0xEF:
			need = 3
		case c >= 0xF0 && c <= 0xF4:
			need = 4
		default:
			return jsonlimit.ErrInvalidUTF8
		}
		s.runeBuf[0], s.runeLen, s.runeNeed, s.st = c, 1, need, stRune
		s.keyLong = true
		return nil
	}
	if s.isKey && len(s.stack) == 1 && !s.keyLong {
		if len(s.key) == 16 {
			s.keyLong = true
		} else {
			s.key = append(s.key, c)
		}
	}
	return nil
}

// number handles c inside a number; a byte that ends it is handed on.
func (s *shapeStream) number(c byte) error {
	digit := '0' <= c && c <= '9'
	switch s.st {
	case stNumMinus:
		switch {
		case c == '0':
			s.st = stNumZero
		case digit:
			s.st = stNumInt
		default:
			return errShapeInvalid
		}
		return nil
	case stNumDot:
		if !digit {
			return errShapeInvalid
		}
		s.st = stNumFrac
		return nil
	case stNumE:
		switch {
		case c == '+' || c == '-':
			s.st = stNumESign
		case digit:
			s.st = stNumExp
		default:
			return errShapeInvalid
		}
		return nil
	case stNumESign:
		if !digit {
			return errShapeInvalid
		}
		s.st = stNumExp
		return nil
	case stNumInt, stNumFrac, stNumExp:
		if digit {
			return nil
		}
	}
	// An accepting state (0, integer, fraction, exponent digits).
	switch {
	case c == '.' && (s.st == stNumZero || s.st == stNumInt):
		s.st = stNumDot
		return nil
	case (c == 'e' || c == 'E') && s.st != stNumExp:
		s.st = stNumE
		return nil
	}
	s.st = stAfter
	return s.after(c)
}

// Close reports whether the answer was complete and has the shape
// checkAnswer requires, and returns its usage.
func (s *shapeStream) Close() (*providers.Usage, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.st != stEnd {
		return nil, errShapeInvalid
	}
	switch s.op {
	case providers.OpChat, providers.OpCompletions:
		if !s.choices {
			return nil, errNoChoices
		}
	case providers.OpEmbeddings:
		if !s.data {
			return nil, errNoData
		}
	}
	if len(s.usage) == 0 || s.usageLong {
		return nil, nil
	}
	return usageFromJSON(gjson.ParseBytes(s.usage)), nil
}
