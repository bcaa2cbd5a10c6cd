package jsonarg

import (
	"errors"
	"testing"
)

func TestValue(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"object", `{"a": 1}`, `{"a": 1}`, nil},
		{"object after spaces", ` { "a": 1}`, ` { "a": 1}`, nil},
		{"empty object", `{}`, `{}`, nil},
		{"empty object with space", `{ }`, `{ }`, nil},
		{"object on lines", "{\n\t\"a\": 1\n}", "{\n\t\"a\": 1\n}", nil},
		{"invalid object", `{"a": }`, "", ErrInvalid},
		{"unclosed brace", `{`, "", ErrInvalid},
		{"path", "examples/configs/fallback.json", `"examples/configs/fallback.json"`, nil},
		{"absolute path", "/etc/gw/tone.json", `"/etc/gw/tone.json"`, nil},
		{"placeholder path", "{env.DIR}/g.json", `"{env.DIR}/g.json"`, nil},
		{"array is a path", `["a"]`, `"[\"a\"]"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Value(tc.in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
