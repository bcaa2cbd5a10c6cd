package jsonlimit

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// scan validates b as one JSON value (RFC 8259) nested at most limit
// levels, with UTF-8 strings, in a single pass and without recursion. It
// replaces three passes (a depth count, gjson's recursive validation and
// utf8.Valid) that ran over every request body and every provider
// answer. A document that passes limit is ErrTooDeep as soon as the scan
// reaches that depth. An otherwise valid document with an object that
// repeats a member name, compared as decoded, is a DuplicateError naming
// the first repeat (names.go).
func scan(b []byte, limit int) error {
	// stack[d] is the container open at depth d+1: '{' or '['. Depths
	// past the fixed array are refused before they are stored.
	var fixed [MaxDepth + 1]byte
	stack := fixed[:0]
	if limit > MaxDepth {
		stack = make([]byte, 0, limit+1)
	}
	// The member names of the open objects (names.go): base[k] is where
	// the names of the k+1th open object begin in names. Ordinary bodies
	// nest a few objects and hold a few dozen names at a time, within
	// the fixed arrays; big is nil until an object passes bigObject.
	var fixedNames [32]nameRef
	var fixedBase [16]int32
	names, base := fixedNames[:0], fixedBase[:0]
	var big []map[string]struct{}
	// strict is the first fault of names alone: the scan goes on, so a
	// document refused for its names is otherwise valid JSON, and a
	// fault of syntax wins.
	var strict error
	wantName := false
	i := skipSpace(b, 0)
	for {
		if wantName {
			// `"name" :` at i, then the member's value.
			wantName = false
			if i >= len(b) || b[i] != '"' {
				return ErrInvalid
			}
			start := i + 1
			var n nameRef
			var err error
			if i, n, err = name(b, start); err != nil {
				if err != ErrSurrogateName {
					return err
				}
				if strict == nil {
					strict = err
				}
			}
			var dup bool
			if names, big, dup = addName(b, n, names, base, big); dup && strict == nil {
				strict = &DuplicateError{Path: pathAt(b, start-1)}
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return ErrInvalid
			}
			i = skipSpace(b, i+1)
		}
		// A value is expected at i.
		if i >= len(b) {
			return ErrInvalid
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) >= limit {
				return ErrTooDeep
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == closer(c) {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				base = append(base, int32(len(names)))
				wantName = true
			}
			continue
		case '"':
			var err error
			if i, err = str(b, i+1); err != nil {
				return err
			}
		case 't':
			if !literal(b, i, "true") {
				return ErrInvalid
			}
			i += 4
		case 'f':
			if !literal(b, i, "false") {
				return ErrInvalid
			}
			i += 5
		case 'n':
			if !literal(b, i, "null") {
				return ErrInvalid
			}
			i += 4
		default:
			var ok bool
			if i, ok = number(b, i); !ok {
				return ErrInvalid
			}
		}
		// A value ended at i: close containers, or go on to the next
		// element or member.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				if i != len(b) {
					return ErrInvalid
				}
				return strict
			}
			if i >= len(b) {
				return ErrInvalid
			}
			top := stack[len(stack)-1]
			if b[i] == closer(top) {
				stack = stack[:len(stack)-1]
				if top == '{' {
					// The object's names go with it.
					d := len(base) - 1
					names, base = names[:base[d]], base[:d]
					if d < len(big) {
						big[d] = nil
					}
				}
				i++
				continue
			}
			if b[i] != ',' {
				return ErrInvalid
			}
			i = skipSpace(b, i+1)
			wantName = top == '{'
			break
		}
	}
}

// name reads a member name's contents from i (just past the opening
// quote) and returns the index past the closing quote and the name. A
// name is nearly always a few plain ASCII bytes: those are read a word
// at a time, in the same pass that finds whether the name holds an
// escape. Any other name is left to str, then searched for escapes; one
// with an unpaired surrogate escape is ErrSurrogateName (with the index
// and the name, so the scan can go on).
func name(b []byte, i int) (int, nameRef, error) {
	j := i
	for j+8 <= len(b) {
		if sp := special8(binary.LittleEndian.Uint64(b[j:])); sp != 0 {
			j += bits.TrailingZeros64(sp) / 8
			if b[j] == '"' {
				return j + 1, nameRef{start: uint32(i), n: uint32(j - i)}, nil
			}
			return slowName(b, i)
		}
		j += 8
	}
	for ; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, nameRef{start: uint32(i), n: uint32(j - i)}, nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return slowName(b, i)
		}
	}
	return slowName(b, i)
}

func slowName(b []byte, i int) (int, nameRef, error) {
	end, err := str(b, i)
	if err != nil {
		return 0, nameRef{}, err
	}
	n := newName(b, i, end-1)
	if n.escaped() && surrogateName(b[i:end-1]) {
		return end, n, ErrSurrogateName
	}
	return end, n, nil
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func literal(b []byte, i int, word string) bool {
	return len(b)-i >= len(word) && string(b[i:i+len(word)]) == word
}

// Eight-byte masks for the plain-ASCII fast path of str.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 flags, in the high bit of each byte, the bytes of w that end
// a plain run in a string: a quote, a backslash, a control character or a
// non-ASCII byte. The lowest flagged byte is exact (borrows only run
// upwards), which is all str needs.
func special8(w uint64) uint64 {
	quote := w ^ (ones * '"')
	backslash := w ^ (ones * '\\')
	// A byte is zero in x exactly when (x-1) borrows into its high bit
	// while x's own high bit is clear; a control byte is below 0x20.
	return (((quote - ones) &^ quote) | ((backslash - ones) &^ backslash) | ((w - ones*0x20) &^ w) | w) & highs
}

// str reads a string's contents from i (just past the opening quote) and
// returns the index past the closing quote. Nearly every string is valid,
// so skipStr checks it at memory speed and only a string it refuses is
// scanned again, in order, by strExact, which names the first fault
// (ErrInvalid or ErrInvalidUTF8) exactly as a single ordered pass would.
func str(b []byte, i int) (int, error) {
	if end, ok := skipStr(b, i); ok {
		return end, nil
	}
	return strExact(b, i)
}

// shortWords is how many plain eight-byte words skipStr reads one by one
// before it takes the rest of a string as a run: keys, roles, model names
// and the text between escapes end within them, and for those a call to
// bytes.IndexByte costs more than the string.
const shortWords = 8

// skipStr reports whether the string whose contents start at i is valid
// (closed, escapes well formed, no control byte, valid UTF-8) and returns
// the index past its closing quote. It reads word by word up to the next
// special byte; after shortWords plain words, or at non-ASCII text, it
// takes the string in runs up to the next quote or backslash, which
// bytes.IndexByte finds with vector instructions, and checks each run at
// once (plainRun). The next quote, once found, is remembered until an
// escape consumes it, so no byte is searched more than a fixed number of
// times and the check stays linear whatever the escapes.
func skipStr(b []byte, i int) (int, bool) {
	q := -1 // the next quote at or after i, once searched for
	for {
		n := 0
		for ; n < shortWords && i+8 <= len(b); n++ {
			if sp := special8(binary.LittleEndian.Uint64(b[i:])); sp != 0 {
				i += bits.TrailingZeros64(sp) / 8
				break
			}
			i += 8
		}
		if n < shortWords {
			if i >= len(b) {
				return 0, false
			}
			switch c := b[i]; {
			case c == '"':
				return i + 1, true
			case c == '\\':
				// The common escapes inline: prose has one every few
				// words, JSON held in a string every few bytes.
				if i+1 < len(b) {
					switch b[i+1] {
					case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
						i += 2
						continue
					}
				}
				if i = escape(b, i); i < 0 {
					return 0, false
				}
				continue
			case c < 0x20:
				return 0, false
			case c < utf8.RuneSelf:
				// Fewer than eight bytes are left: byte by byte.
				i++
				continue
			}
			// Non-ASCII text: a run, where utf8.Valid checks it.
		}
		if q < i {
			k := bytes.IndexByte(b[i:], '"')
			if k < 0 {
				return 0, false
			}
			q = i + k
		}
		end := q
		if k := bytes.IndexByte(b[i:q], '\\'); k >= 0 {
			end = i + k
		}
		if !plainRun(b[i:end]) {
			return 0, false
		}
		if end == q {
			return q + 1, true
		}
		// An escape at end; `\"` consumes the quote at q, which the
		// next run notices (q < i) and searches past.
		if i = escape(b, end); i < 0 {
			return 0, false
		}
	}
}

// escape returns the index past the escape sequence starting with the
// backslash at i, or -1 when it is not one JSON allows.
func escape(b []byte, i int) int {
	if i+1 >= len(b) {
		return -1
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2
	case 'u':
		if i+6 > len(b) || !hex4(b[i+2:i+6]) {
			return -1
		}
		return i + 6
	}
	return -1
}

// Bytes below this are control characters, which JSON strings must
// escape.
const ctlLimit = ones * 0x20

// plainRun reports whether s, string contents without quotes or
// backslashes, holds no control byte and is valid UTF-8. ASCII text goes
// 32 bytes per branch: a byte is flagged in the high bit of (w-0x20)|w
// exactly when it is a control byte (its subtraction borrows) or not ASCII
// (its own high bit); a borrow reaches the next byte only from a flagged
// one, so "any flag" is exact. Text with non-ASCII bytes from there on is
// left to textRun.
func plainRun(s []byte) bool {
	for len(s) >= 32 {
		w0 := binary.LittleEndian.Uint64(s[0:8])
		w1 := binary.LittleEndian.Uint64(s[8:16])
		w2 := binary.LittleEndian.Uint64(s[16:24])
		w3 := binary.LittleEndian.Uint64(s[24:32])
		if ((w0-ctlLimit)|w0|(w1-ctlLimit)|w1|(w2-ctlLimit)|w2|(w3-ctlLimit)|w3)&highs != 0 {
			return textRun(s)
		}
		s = s[32:]
	}
	for len(s) >= 8 {
		w := binary.LittleEndian.Uint64(s)
		if ((w-ctlLimit)|w)&highs != 0 {
			return textRun(s)
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 || c >= utf8.RuneSelf {
			return textRun(s)
		}
	}
	return true
}

// textRun is plainRun for text that is not all ASCII: no control byte
// ((w-0x20)&^w flags a byte below 0x20, and only such a byte borrows), and
// valid UTF-8 as utf8.Valid judges it, which is what decoding rune by
// rune would find.
func textRun(s []byte) bool {
	if !utf8.Valid(s) {
		return false
	}
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		if ((w-ctlLimit)&^w)&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return false
		}
	}
	return true
}

// strExact is str for a string skipStr refused: it walks the contents
// in order (plain ASCII eight bytes at a time) and returns the first
// fault it meets.
func strExact(b []byte, i int) (int, error) {
	for {
		for i+8 <= len(b) {
			sp := special8(binary.LittleEndian.Uint64(b[i:]))
			if sp != 0 {
				i += bits.TrailingZeros64(sp) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			return 0, ErrInvalid
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i = escape(b, i); i < 0 {
				return 0, ErrInvalid
			}
		case c < 0x20:
			return 0, ErrInvalid
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, ErrInvalidUTF8
			}
			i += size
		}
	}
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func number(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
