package jsonlimit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Strict reading. JSON leaves repeated member names to the reader: Go's
// encoding/json and most provider stacks keep the last, gjson and
// Member the first. A body {"model":"a","model":"b"} would then be
// judged (allowed models, price, guardrails) as one request and served
// as another. So scan refuses a repeated name in any object at any
// depth, comparing names as decoded ("mod\u0065l" is "model"), and a
// name holding an unpaired surrogate escape, which decoders turn into
// different text (Go into U+FFFD, Python keeps it, gjson drops what
// follows). What passes has one reading whichever decoder reads it.

// DuplicateError is returned by Check, Object and CheckDepth for an
// object that names a member twice.
type DuplicateError struct {
	// Path is where the repeated member is, as the gateway's error
	// envelope names a parameter: "model", "messages[0].role". It is
	// cut to maxPath bytes.
	Path string
}

func (e *DuplicateError) Error() string {
	return "the JSON member " + strconv.Quote(e.Path) + " appears more than once"
}

// ErrSurrogateName is returned for a member name with an unpaired UTF-16
// surrogate escape ("\ud800"), which decoders read differently.
var ErrSurrogateName = errors.New("a JSON member name holds an unpaired surrogate escape")

// AsDuplicate returns err's DuplicateError, if it is one.
func AsDuplicate(err error) (*DuplicateError, bool) {
	var d *DuplicateError
	ok := errors.As(err, &d)
	return d, ok
}

// maxPath bounds DuplicateError.Path: a client's names are echoed in the
// error, and a path is never worth more.
const maxPath = 256

// bigObject is how many members an object has before its names are
// looked up in a map instead of compared one by one: below it a linear
// search is faster than hashing, above it the search would be quadratic.
const bigObject = 32

// nameRef is a member name as scan saw it: where its contents (between
// the quotes) start in b, and their length, whose top bit says they hold
// an escape (then they are compared decoded). Eight bytes, so scan's
// fixed array of them is cheap to clear.
type nameRef struct {
	start, n uint32
}

const escapedBit = 1 << 31

func newName(b []byte, start, end int) nameRef {
	n := nameRef{start: uint32(start), n: uint32(end - start)}
	if hasBackslash(b[start:end]) {
		n.n |= escapedBit
	}
	return n
}

func (n nameRef) escaped() bool { return n.n&escapedBit != 0 }

func (n nameRef) raw(b []byte) []byte {
	return b[n.start : n.start+n.n&^escapedBit]
}

// addName adds n to the names of the innermost open object (names from
// base[len(base)-1], or big's map for that object) and reports whether
// the object has that name already.
func addName(b []byte, n nameRef, names []nameRef, base []int32, big []map[string]struct{}) ([]nameRef, []map[string]struct{}, bool) {
	d := len(base) - 1
	if d < len(big) && big[d] != nil {
		return names, big, !addToMap(big[d], b, n)
	}
	from := int(base[d])
	for _, o := range names[from:] {
		// Raw bytes decide unless an escape is involved.
		if o.n == n.n && string(o.raw(b)) == string(n.raw(b)) ||
			(o.n|n.n)&escapedBit != 0 && sameDecoded(b, o, n) {
			return names, big, true
		}
	}
	if len(names)-from < bigObject {
		return append(names, n), big, false
	}
	return names[:from], toMap(big, d, b, names[from:], n), false
}

// toMap moves the names of the object at object depth d+1 (list, and n
// after them) into a map, big[d], returned: past bigObject names each
// further name costs a lookup, not a pass over all before it.
func toMap(big []map[string]struct{}, d int, b []byte, list []nameRef, n nameRef) []map[string]struct{} {
	for len(big) <= d {
		big = append(big, nil)
	}
	m := make(map[string]struct{}, 2*bigObject)
	for _, o := range list {
		m[string(decodeName(nil, b, o))] = struct{}{}
	}
	m[string(decodeName(nil, b, n))] = struct{}{}
	big[d] = m
	return big
}

// addToMap adds n to a large object's names, or reports false when the
// object has it already.
func addToMap(m map[string]struct{}, b []byte, n nameRef) bool {
	var buf [64]byte
	key := decodeName(buf[:0], b, n)
	if _, dup := m[string(key)]; dup {
		return false
	}
	m[string(key)] = struct{}{}
	return true
}

// hasBackslash reports whether s, a name's contents, holds an escape;
// names are short, so eight bytes at a time without a call.
func hasBackslash(s []byte) bool {
	for len(s) >= 8 {
		w := binary.LittleEndian.Uint64(s) ^ (ones * '\\')
		if (w-ones)&^w&highs != 0 {
			return true
		}
		s = s[8:]
	}
	for _, c := range s {
		if c == '\\' {
			return true
		}
	}
	return false
}

// sameDecoded reports whether two checked names, one of which at least
// holds an escape, are the same once decoded (into stack buffers for
// names of ordinary length). Names without escapes are compared raw, in
// scan.
func sameDecoded(b []byte, x, y nameRef) bool {
	var bx, by [64]byte
	return bytes.Equal(decodeName(bx[:0], b, x), decodeName(by[:0], b, y))
}

func decodeName(dst, b []byte, n nameRef) []byte {
	if !n.escaped() {
		return append(dst, n.raw(b)...)
	}
	return unescape(dst, n.raw(b))
}

// unescape appends the decoded contents of a checked JSON string to dst,
// as encoding/json decodes them: escapes replaced, a surrogate pair
// joined, an unpaired surrogate replaced by U+FFFD.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		k := bytes.IndexByte(s[i:], '\\')
		if k < 0 {
			return append(dst, s[i:]...)
		}
		dst = append(dst, s[i:i+k]...)
		i += k
		if i+1 >= len(s) {
			return dst // not a checked string
		}
		c := s[i+1]
		i += 2
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hexRune(s, i)
			if r < 0 {
				return dst
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2 := hexRuneAfter(s, i); r2 >= 0 {
					if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
						dst = utf8.AppendRune(dst, p)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
	}
	return dst
}

// hexRune reads the four hex digits at s[i:], or returns -1.
func hexRune(s []byte, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// hexRuneAfter reads a \uXXXX escape at s[i:], or returns -1.
func hexRuneAfter(s []byte, i int) rune {
	if i+2 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
		return -1
	}
	return hexRune(s, i+2)
}

// surrogateName reports whether the escaped name s holds a \u escape of
// a surrogate that is not half of a pair.
func surrogateName(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++
		if i >= len(s) || s[i] != 'u' {
			continue
		}
		r := hexRune(s, i+1)
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		r2 := hexRuneAfter(s, i+1)
		if utf16.DecodeRune(r, r2) == utf8.RuneError {
			return true
		}
		i += 6
	}
	return false
}

// pathAt names the member whose name's opening quote is at off in b, a
// prefix of which scan has checked, as "a.b[2].c". It walks b up to off
// again, so the scan itself tracks no positions; only an error pays.
func pathAt(b []byte, off int) string {
	type level struct {
		object bool
		index  int
		name   nameRef
	}
	var levels []level
	expectName := false
	for i := 0; i < off; i++ {
		switch b[i] {
		case '{':
			levels = append(levels, level{object: true})
			expectName = true
		case '[':
			levels = append(levels, level{})
		case '}', ']':
			levels = levels[:len(levels)-1]
		case ',':
			if top := &levels[len(levels)-1]; top.object {
				expectName = true
			} else {
				top.index++
			}
		case '"':
			q := closingQuote(b, i+1)
			if q < 0 {
				return ""
			}
			if expectName {
				levels[len(levels)-1].name = newName(b, i+1, q)
				expectName = false
			}
			i = q
		}
	}
	var p []byte
	for k, l := range levels[:len(levels)-1] {
		if l.object {
			p = appendName(p, k == 0, b, l.name)
		} else {
			p = strconv.AppendInt(append(p, '['), int64(l.index), 10)
			p = append(p, ']')
		}
	}
	q := closingQuote(b, off+1)
	if q < 0 {
		return string(p)
	}
	p = appendName(p, len(levels) == 1, b, newName(b, off+1, q))
	if len(p) > maxPath {
		cut := maxPath
		for cut > 0 && p[cut]&0xC0 == 0x80 {
			cut--
		}
		p = p[:cut]
	}
	return string(p)
}

// appendName appends a member's name to a path, after a dot unless it
// is the path's first segment.
func appendName(p []byte, first bool, b []byte, n nameRef) []byte {
	if !first {
		p = append(p, '.')
	}
	return decodeName(p, b, n)
}

// String decodes raw, a checked JSON string value such as Member
// returns, as encoding/json would (an unpaired surrogate escape becomes
// U+FFFD), and reports whether raw is a string at all. Reading a member
// the gateway judges (the model) with this decoder, not gjson's, which
// drops what follows an unpaired surrogate, keeps the gateway's reading
// and the provider's one.
func String(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	if !hasBackslash(s) {
		return string(s), true
	}
	return string(unescape(make([]byte, 0, len(s)), s)), true
}

// HasName reports whether any object of b, a document that passed
// Check, at any depth, has a member called name, names compared as
// decoded and, with fold, without regard to case as encoding/json
// matches a member to a struct field (strings.EqualFold). It is the
// check to make before decoding client JSON into a struct that must not
// receive a field ("custom_host"): a byte search misses
// "custom\u005fhost", and a case-sensitive one misses "Custom_Host",
// both of which encoding/json decodes into the field.
func HasName(b []byte, name string, fold bool) bool {
	expectName := false
	var buf [64]byte
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', ',':
			// In an array a comma is followed by a value, which a
			// string check below tells from a name by what follows it.
			expectName = true
		case ':', '[':
			expectName = false
		case '"':
			q := closingQuote(b, i+1)
			if q < 0 {
				return false
			}
			if expectName && nextIsColon(b, q+1) {
				n := newName(b, i+1, q)
				got := decodeName(buf[:0], b, n)
				if string(got) == name || fold && strings.EqualFold(string(got), name) {
					return true
				}
			}
			expectName = false
			i = q
		}
	}
	return false
}

// nextIsColon reports whether the first non-space byte from i is ':'.
func nextIsColon(b []byte, i int) bool {
	i = skipSpace(b, i)
	return i < len(b) && b[i] == ':'
}
