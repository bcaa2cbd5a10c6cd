// Package jsonlimit checks JSON the gateway did not write (request bodies,
// configs, metadata, provider answers) before anything walks it
// recursively. Recursive validators and decoders use one stack frame per
// nesting level, so a body of a few megabytes of "[" can exhaust the
// goroutine stack and end the process; Check scans iteratively and refuses
// such input first. It is also the gateway's one strict reading (names.go):
// an object that names a member twice, compared as decoded, is refused,
// so what the gateway judges is what a last-wins provider reads. Member
// and Members then read top-level members of a checked object without
// walking the values they skip, so asking a large prompt for a field it
// lacks costs a vector search, not a parse.
package jsonlimit

import (
	"errors"
)

// MaxDepth is the deepest nesting of arrays and objects the gateway
// accepts in any JSON it inspects. Real requests nest a handful of levels
// (a JSON schema in a tool definition rarely passes 20); 128 leaves room
// and keeps every recursive walk shallow.
const MaxDepth = 128

// Errors returned by Check.
var (
	ErrTooDeep     = errors.New("JSON nesting exceeds the gateway's limit of 128 levels")
	ErrInvalid     = errors.New("not valid JSON")
	ErrInvalidUTF8 = errors.New("JSON text is not valid UTF-8")
)

// Depth returns the deepest nesting of arrays and objects in b, scanning
// iteratively and skipping string contents, and stops counting once the
// nesting passes limit (returning limit+1). It does not validate b.
func Depth(b []byte, limit int) int {
	depth, deepest := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			// Skip the string, honouring escapes.
			for i++; i < len(b); i++ {
				if b[i] == '\\' {
					i++
					continue
				}
				if b[i] == '"' {
					break
				}
			}
		case '[', '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// Check reports whether b is valid UTF-8 JSON nested at most MaxDepth
// levels, whose objects name each member once (a *DuplicateError
// otherwise) with no unpaired surrogate escape in a name
// (ErrSurrogateName). It scans once and iteratively, so no input can
// exhaust the stack, and callers may walk a checked document
// recursively.
func Check(b []byte) error {
	return CheckDepth(b, MaxDepth)
}

// CheckDepth is Check with another depth limit.
func CheckDepth(b []byte, limit int) error {
	return scan(b, limit)
}

// CheckString is Check for a string.
func CheckString(s string) error {
	return Check([]byte(s))
}

// Object reports whether b passes Check and is a JSON object.
func Object(b []byte) error {
	if err := Check(b); err != nil {
		return err
	}
	// Valid JSON is an object exactly when its first non-space byte
	// opens one; gjson.ParseBytes would copy all of b to find out.
	for _, c := range b {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if c == '{' {
			return nil
		}
		return ErrNotObject
	}
	return ErrNotObject
}

// ErrNotObject is returned by Object for valid JSON that is not an object.
var ErrNotObject = errors.New("JSON value is not an object")
