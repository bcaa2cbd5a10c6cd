package jsonlimit

import (
	"bytes"
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	deep := func(n int) []byte {
		return append(bytes.Repeat([]byte("["), n), bytes.Repeat([]byte("]"), n)...)
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"object", []byte(`{"a":[1,{"b":"c"}]}`), nil},
		{"at the limit", deep(MaxDepth), nil},
		{"one past the limit", deep(MaxDepth + 1), ErrTooDeep},
		{"six million brackets", bytes.Repeat([]byte("["), 6_000_000), ErrTooDeep},
		{"brackets inside strings do not count", []byte(`{"a":"` + string(deep(1000)) + `"}`), nil},
		{"escaped quote in string", []byte(`{"a":"\"[[[["}`), nil},
		{"invalid", []byte(`{"a":`), ErrInvalid},
		{"invalid utf-8", []byte("{\"a\":\"\xff\"}"), ErrInvalidUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.in); !errors.Is(got, tt.want) {
				t.Fatalf("Check = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestObject(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{}`, nil},
		{" \n\t{\"a\":[1,{}]} ", nil},
		{`[1]`, ErrNotObject},
		{`[{}]`, ErrNotObject},
		{`"a{"`, ErrNotObject},
		{`"{"`, ErrNotObject},
		{`1`, ErrNotObject},
		{`null`, ErrNotObject},
		{`{`, ErrInvalid},
		{``, ErrInvalid},
	} {
		if err := Object([]byte(tc.in)); !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("Object(%q) = %v, want %v", tc.in, err, tc.want)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hello, how are you today? Tell me a story."}],"max_tokens":100}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(body); err != nil {
			b.Fatal(err)
		}
	}
}
