package jsonlimit

import (
	"bytes"
)

// Member returns the raw value of the top-level member called name in b,
// a JSON object that passed Check or Object, and whether there is one.
// Names are compared as decoded (an escaped name matches its text),
// exactly as Check compares them when it refuses a repeated name, so a
// checked object has one member of each name and Member finds the one
// every decoder finds (on unchecked input the first wins, as with
// gjson.GetBytes(b, name) for a plain name). Unlike gjson, which walks every value byte by
// byte, Member skips strings with bytes.IndexByte: asking a 200 KB chat
// body for a member it lacks (stream_options, on every stream) costs a
// vector search of the prompt, not a walk of it. Given input that did not
// pass Check, the answer is unspecified, but Member never reads past b.
func Member(b []byte, name string) ([]byte, bool) {
	var value []byte
	members(b, func(key, v []byte) bool {
		if nameIs(key, name) {
			value = v
			return false
		}
		return true
	})
	return value, value != nil
}

// Members is Member for several names in one walk: values[i] is set to
// the raw value of names[i], or nil when b has no such member. values
// must be at least as long as names.
func Members(b []byte, names []string, values [][]byte) {
	clear(values[:len(names)])
	left := len(names)
	members(b, func(key, v []byte) bool {
		for i, name := range names {
			if values[i] == nil && nameIs(key, name) {
				values[i] = v
				left--
			}
		}
		return left > 0
	})
}

// members calls yield with the raw name and value of each top-level
// member of the checked object b, in order, until yield returns false.
// A value is never empty, so a nil value can mean "absent".
func members(b []byte, yield func(key, value []byte) bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		keyEnd := closingQuote(b, i+1)
		if keyEnd < 0 {
			return
		}
		key := b[i+1 : keyEnd]
		i = skipSpace(b, keyEnd+1)
		if i >= len(b) || b[i] != ':' {
			return
		}
		start := skipSpace(b, i+1)
		end := skipValue(b, start)
		if end <= start {
			return
		}
		if !yield(key, b[start:end]) {
			return
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i = skipSpace(b, i+1)
	}
}

// closingQuote returns the index of the quote that closes the checked
// string whose contents start at i, or -1. A quote is escaped exactly when
// an odd number of backslashes precede it; each backslash is counted for
// at most one quote, so the search stays linear.
func closingQuote(b []byte, i int) int {
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return -1
		}
		q := i + k
		n := 0
		for q-n-1 >= i && b[q-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// skipValue returns the index just past the checked JSON value at i, or
// -1 when b ends first.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		if q := closingQuote(b, i+1); q >= 0 {
			return q + 1
		}
		return -1
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				q := closingQuote(b, i+1)
				if q < 0 {
					return -1
				}
				i = q
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number or a literal ends at the next delimiter.
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// nameIs reports whether the raw member name key decodes to name, with
// the decoder Check compares names with (unescape).
func nameIs(key []byte, name string) bool {
	if !hasBackslash(key) {
		return string(key) == name
	}
	var buf [64]byte
	return string(unescape(buf[:0], key)) == name
}
