package jsonlimit

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// Case-folded reading. Check refuses a name given twice, compared as
// decoded and exactly. A reader that matches names to fields without
// regard to case (Go's encoding/json, many JSON-RPC stacks) also reads
// {"name":"a","Name":"b"} as one member given twice, and keeps the last:
// a gateway that judged "name" would have judged a value the server never
// reads. CheckFold refuses such objects, for the protocols (MCP's
// JSON-RPC) where the gateway judges members a case-folding reader reads
// after it.

// CheckFold returns a *DuplicateError for the first object of b, a
// document that passed Check, naming two members whose names, decoded,
// differ only in case (Unicode simple folding, as strings.EqualFold). It
// scans iteratively; objects of more than bigObject members are compared
// through a map, so no input costs more than linear time.
func CheckFold(b []byte) error {
	var fixedNames [64]nameRef
	var fixedBase [16]int32
	// base[k] is where the names of the k+1th open container begin in
	// names, or -1 for an array.
	names, base := fixedNames[:0], fixedBase[:0]
	var big []map[string]struct{}
	expectName := false
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			base = append(base, int32(len(names)))
			expectName = true
		case '[':
			base = append(base, -1)
			expectName = false
		case '}', ']':
			d := len(base) - 1
			if d < 0 {
				return nil // not a checked document
			}
			if base[d] >= 0 {
				names = names[:base[d]]
				if d < len(big) {
					big[d] = nil
				}
			}
			base = base[:d]
		case ',':
			expectName = len(base) > 0 && base[len(base)-1] >= 0
		case ':':
			expectName = false
		case '"':
			q := closingQuote(b, i+1)
			if q < 0 {
				return nil
			}
			if expectName && len(base) > 0 {
				n := newName(b, i+1, q)
				var dup bool
				names, big, dup = addFolded(b, n, names, base, big)
				if dup {
					return &DuplicateError{Path: pathAt(b, i)}
				}
			}
			expectName = false
			i = q
		}
	}
	return nil
}

// addFolded adds n to the innermost open object's names and reports
// whether the object has a name equal to it under case folding.
func addFolded(b []byte, n nameRef, names []nameRef, base []int32, big []map[string]struct{}) ([]nameRef, []map[string]struct{}, bool) {
	d := len(base) - 1
	if d < len(big) && big[d] != nil {
		key := foldKey(b, n)
		if _, dup := big[d][key]; dup {
			return names, big, true
		}
		big[d][key] = struct{}{}
		return names, big, false
	}
	from := int(base[d])
	var bx, by [64]byte
	x := decodeName(bx[:0], b, n)
	for _, o := range names[from:] {
		if bytes.EqualFold(x, decodeName(by[:0], b, o)) {
			return names, big, true
		}
	}
	if len(names)-from < bigObject {
		return append(names, n), big, false
	}
	for len(big) <= d {
		big = append(big, nil)
	}
	m := make(map[string]struct{}, 2*bigObject)
	for _, o := range names[from:] {
		m[foldKey(b, o)] = struct{}{}
	}
	m[foldKey(b, n)] = struct{}{}
	big[d] = m
	return names[:from], big, false
}

// foldKey is a name's decoded text with each rune replaced by the
// smallest rune of its simple-folding orbit: two names have the same key
// exactly when strings.EqualFold says they are equal.
func foldKey(b []byte, n nameRef) string {
	var buf [64]byte
	s := decodeName(buf[:0], b, n)
	out := make([]byte, 0, len(s))
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		s = s[size:]
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out = utf8.AppendRune(out, least)
	}
	return string(out)
}
