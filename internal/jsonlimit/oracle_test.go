package jsonlimit

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// This file keeps the scan as it was before skipStr (one ordered pass,
// strings eight bytes at a time and byte by byte at every special byte)
// as the oracle the fuzz tests hold the current scan to: same verdict,
// same error, on any input.

// oldScan validates b as one JSON value (RFC 8259) nested at most limit
// levels, with UTF-8 strings, in a single pass and without recursion. It
// replaces three passes (a depth count, gjson's recursive validation and
// utf8.Valid) that ran over every request body and every provider
// answer. A document that passes limit is ErrTooDeep as soon as the scan
// reaches that depth.
func oldScan(b []byte, limit int) error {
	// stack[d] is the container open at depth d+1: '{' or '['. Depths
	// past the fixed array are refused before they are stored.
	var fixed [MaxDepth + 1]byte
	stack := fixed[:0]
	if limit > MaxDepth {
		stack = make([]byte, 0, limit+1)
	}
	i := oldSkipSpace(b, 0)
	for {
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
			i = oldSkipSpace(b, i+1)
			if i < len(b) && b[i] == oldCloser(c) {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				var err error
				if i, err = oldMember(b, i); err != nil {
					return err
				}
			}
			continue
		case '"':
			var err error
			if i, err = oldStr(b, i+1); err != nil {
				return err
			}
		case 't':
			if !oldLiteral(b, i, "true") {
				return ErrInvalid
			}
			i += 4
		case 'f':
			if !oldLiteral(b, i, "false") {
				return ErrInvalid
			}
			i += 5
		case 'n':
			if !oldLiteral(b, i, "null") {
				return ErrInvalid
			}
			i += 4
		default:
			var ok bool
			if i, ok = oldNumber(b, i); !ok {
				return ErrInvalid
			}
		}
		// A value ended at i: close containers, or go on to the next
		// element or member.
		for {
			i = oldSkipSpace(b, i)
			if len(stack) == 0 {
				if i != len(b) {
					return ErrInvalid
				}
				return nil
			}
			if i >= len(b) {
				return ErrInvalid
			}
			top := stack[len(stack)-1]
			if b[i] == oldCloser(top) {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return ErrInvalid
			}
			i = oldSkipSpace(b, i+1)
			if top == '{' {
				var err error
				if i, err = oldMember(b, i); err != nil {
					return err
				}
			}
			break
		}
	}
}

func oldCloser(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// oldMember reads `"name" :` at i and returns where the value starts.
func oldMember(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, ErrInvalid
	}
	i, err := oldStr(b, i+1)
	if err != nil {
		return 0, err
	}
	i = oldSkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, ErrInvalid
	}
	return oldSkipSpace(b, i+1), nil
}

func oldSkipSpace(b []byte, i int) int {
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

func oldLiteral(b []byte, i int, word string) bool {
	return len(b)-i >= len(word) && string(b[i:i+len(word)]) == word
}

// Eight-byte masks for the plain-ASCII fast path of oldStr.
const (
	oldOnes  = 0x0101010101010101
	oldHighs = 0x8080808080808080
)

// oldSpecial8 flags, in the high bit of each byte, the bytes of w that end
// a plain run in a string: a quote, a backslash, a control character or a
// non-ASCII byte. The lowest flagged byte is exact (borrows only run
// upwards), which is all oldStr needs.
func oldSpecial8(w uint64) uint64 {
	quote := w ^ (oldOnes * '"')
	backslash := w ^ (oldOnes * '\\')
	// A byte is zero in x exactly when (x-1) borrows into its high bit
	// while x's own high bit is clear; a control byte is below 0x20.
	return (((quote - oldOnes) &^ quote) | ((backslash - oldOnes) &^ backslash) | ((w - oldOnes*0x20) &^ w) | w) & oldHighs
}

// oldStr reads a string's contents from i (just past the opening quote) and
// returns the index past the closing quote. Plain ASCII goes eight bytes
// at a time.
func oldStr(b []byte, i int) (int, error) {
	for {
		for i+8 <= len(b) {
			sp := oldSpecial8(binary.LittleEndian.Uint64(b[i:]))
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
			if i+1 >= len(b) {
				return 0, ErrInvalid
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !oldHex4(b[i+2:i+6]) {
					return 0, ErrInvalid
				}
				i += 6
			default:
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

func oldHex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// oldNumber reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func oldNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = oldDigits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := oldDigits(b, i+1)
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
		j := oldDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func oldDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
