package guardrails

import (
	"strings"
	"testing"
)

// TestMaskURLs: user information and query values of every URL in a
// message are masked, whatever net/http left of them.
func TestMaskURLs(t *testing.T) {
	cases := []struct{ in, want string }{
		{`Post "http://hookuser:***@127.0.0.1:9/x?token=SECRET&a=b": dial tcp: connection refused`,
			`Post "http://***@127.0.0.1:9/x?token=***&a=***": dial tcp: connection refused`},
		{`Get "https://TOKEN@example.com/p#frag": EOF`, `Get "https://***@example.com/p#***": EOF`},
		{`no url here`, `no url here`},
		{`Get "http://h/p?SECRET": EOF`, `Get "http://h/p?***": EOF`},
		{`bad https://[::1 and more`, `bad https://*** and more`},
	}
	for _, tc := range cases {
		if got := MaskURLs(tc.in); got != tc.want {
			t.Errorf("MaskURLs(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		for _, secret := range []string{"hookuser", "SECRET", "TOKEN", "frag"} {
			if strings.Contains(MaskURLs(tc.in), secret) {
				t.Errorf("MaskURLs(%q) keeps %q", tc.in, secret)
			}
		}
	}
	if got, want := HideURLs(`Post "https://hooks.example.com/services/T0/B0/XYZ?x=1": EOF`), `Post "https://hooks.example.com/***?x=***": EOF`; got != want {
		t.Errorf("HideURLs: got %q, want %q", got, want)
	}
}
