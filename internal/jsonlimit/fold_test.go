package jsonlimit

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestCheckFold(t *testing.T) {
	tests := []struct {
		name, in string
		// path is the DuplicateError's path; "" when the document passes.
		path string
	}{
		{"distinct names", `{"name":"a","arguments":{}}`, ""},
		{"case variant at the top", `{"name":"allowed","Name":"denied"}`, "Name"},
		{"case variant in params", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a","NAME":"b"}}`, "params.NAME"},
		{"escaped case variant", `{"name":"a","N\u0061me":"b"}`, "Name"},
		{"Kelvin sign folds to k", `{"k":1,"\u212a":2}`, "\u212a"},
		{"long s folds to s", `{"s":1,"\u017f":2}`, "\u017f"},
		{"same name in sibling objects", `[{"a":1},{"A":2}]`, ""},
		{"same name at two depths", `{"a":{"A":1}}`, ""},
		{"after a nested object closes", `{"a":{"b":1},"A":2}`, "A"},
		{"inner names are the inner object's", `{"a":{"b":1},"B":2}`, ""},
		{"in an array of objects", `{"x":[{"id":1},{"id":1,"ID":2}]}`, "x[1].ID"},
		{"strings are not names", `{"a":"A","b":["a","A"]}`, ""},
		{"unicode that does not fold", `{"é":1,"e":2}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.in)
			if !json.Valid(b) || Check(b) != nil {
				t.Fatalf("case does not pass Check")
			}
			err := CheckFold(b)
			if tt.path == "" {
				if err != nil {
					t.Fatalf("CheckFold = %v, want nil", err)
				}
				return
			}
			d, ok := AsDuplicate(err)
			if !ok || d.Path != tt.path {
				t.Fatalf("CheckFold = %v, want a duplicate at %q", err, tt.path)
			}
		})
	}
}

// TestCheckFoldBigObject crosses bigObject, where names go to a map: a
// case variant after it is still found, and distinct names pass.
func TestCheckFoldBigObject(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 3 * bigObject {
		sb.WriteString(`"name` + strconv.Itoa(i) + `":1,`)
	}
	ok := sb.String() + `"last":{"inner":1}}`
	if err := CheckFold([]byte(ok)); err != nil {
		t.Fatalf("distinct names: %v", err)
	}
	dup := sb.String() + `"NAME7":2}`
	if d, isDup := AsDuplicate(CheckFold([]byte(dup))); !isDup || d.Path != "NAME7" {
		t.Fatalf("case variant past bigObject: %v", d)
	}
}

func FuzzCheckFold(f *testing.F) {
	f.Add(`{"name":"a","Name":"b"}`)
	f.Add(`[{"a":{"B":1,"b":2}}]`)
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if Check(b) != nil {
			return
		}
		err := CheckFold(b)
		// A document with no case variants is what encoding/json reads
		// into a map with no two keys equal under folding.
		if got := hasFoldedPair(t, b); (err != nil) != got {
			t.Fatalf("CheckFold(%s) = %v, but case variants: %v", s, err, got)
		}
	})
}

// hasFoldedPair reports whether any object of b has two member names
// equal under strings.EqualFold.
func hasFoldedPair(t *testing.T, b []byte) bool {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Skip()
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k, e := range x {
				for _, o := range keys {
					if strings.EqualFold(o, k) {
						return true
					}
				}
				keys = append(keys, k)
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
