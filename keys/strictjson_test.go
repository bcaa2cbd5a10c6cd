package keys

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		member   string // "" when accepted
	}{
		{"plain", `{"a":1,"b":[{"c":"x"}]}`, ""},
		{"forbidden", `{"provider":"openai","custom_host":"http://x"}`, "custom_host"},
		{"forbidden, escaped", `{"provider":"openai","custom\u005fhost":"http://x"}`, "custom_host"},
		{"forbidden, nested", `{"targets":[{"a":1},{"custom\u005Fhost":"x"}]}`, "targets[1].custom_host"},
		{"forbidden, another case (encoding/json matches it)", `{"provider":"openai","Custom_Host":"http://x"}`, "Custom_Host"},
		{"duplicate", `{"model":"a","model":"b"}`, "model"},
		{"duplicate after unescaping", `{"model":"a","mod\u0065l":"b"}`, "model"},
		{"duplicate, nested", `{"x":{"y":1,"y":2}}`, "x.y"},
		{"same name in two objects", `{"x":{"y":1},"z":{"y":2}}`, ""},
		{"a string that looks like the name", `{"note":"custom_host"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckJSON([]byte(tc.in), "custom_host")
			if tc.member == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var je *JSONError
			if !errors.As(err, &je) || je.Member != tc.member {
				t.Fatalf("got %v, want a refusal of %s", err, tc.member)
			}
		})
	}
	for _, bad := range []string{`{"a":1`, `{"a":1}{}`, `{"a" 1}`, strings.Repeat("[", 100) + strings.Repeat("]", 100)} {
		if CheckJSON([]byte(bad)) == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestCheckConfigJSONRefusesMask(t *testing.T) {
	for in, refused := range map[string]bool{
		`{"provider":"openai","api_key":"****"}`:                                          true,
		`{"targets":[{"provider":"openai","api_key":"sk-real"}]}`:                         false,
		`{"before_request_hooks":[{"checks":[{"parameters":{"headers":{"a":"****"}}}]}]}`: true,
		`{"override_params":{"user":"****"}}`:                                             false,
	} {
		if err := CheckConfigJSON([]byte(in)); (err != nil) != refused {
			t.Errorf("%s: %v", in, err)
		}
	}
}
