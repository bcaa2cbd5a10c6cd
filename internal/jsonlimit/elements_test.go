package jsonlimit

import (
	"slices"
	"testing"
)

// TestElements: every element of an array, raw, in order; the walk stops
// when yield says so; non-arrays and broken input yield what they can.
func TestElements(t *testing.T) {
	tests := []struct {
		in   string
		stop int // stop after this many, 0 = never
		want []string
	}{
		{`[]`, 0, nil},
		{` [ 1 , "a\"]" , {"k":[1,{"x":"]"}]} , [true,null] ] `, 0, []string{`1`, `"a\"]"`, `{"k":[1,{"x":"]"}]}`, `[true,null]`}},
		{`[{"role":"user"},{"role":"x"},3]`, 2, []string{`{"role":"user"}`, `{"role":"x"}`}},
		{`{"a":1}`, 0, nil},
		{`"[1,2]"`, 0, nil},
		{`[1,2`, 0, []string{`1`, `2`}},
		{`[{"a":`, 0, nil},
		{``, 0, nil},
	}
	for _, tt := range tests {
		var got []string
		Elements([]byte(tt.in), func(v []byte) bool {
			got = append(got, string(v))
			return tt.stop == 0 || len(got) < tt.stop
		})
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.in, got, tt.want)
		}
	}
}
