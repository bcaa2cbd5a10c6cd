package mcp

import (
	"strings"
	"testing"
)

func TestExposedName(t *testing.T) {
	long := strings.Repeat("x", 70)
	tests := []struct {
		name, prefix, tool string
		want               string // "" when the name is hashed (checked below)
	}{
		{"prefixed", "files", "read", "files__read"},
		{"unprefixed", "", "read", "read"},
		{"dash and underscore", "web-1", "get_page", "web-1__get_page"},
		{"exactly 64", "s", strings.Repeat("a", 61), "s__" + strings.Repeat("a", 61)},
		{"65 is cut", "s", strings.Repeat("a", 62), ""},
		{"a dot", "files", "dot.name", ""},
		{"a space", "", "two words", ""},
		{"too long unprefixed", "", long, ""},
		{"non-ASCII", "files", "lire_résumé", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := tt.prefix
			if server == "" {
				server = "srv"
			}
			got := exposedName(tt.prefix, server, tt.tool)
			if len(got) > MaxNameLen || !plainName(got) {
				t.Fatalf("%q: %d bytes or not plain", got, len(got))
			}
			if again := exposedName(tt.prefix, server, tt.tool); again != got {
				t.Fatalf("not stable: %q then %q", got, again)
			}
			if tt.want != "" {
				if got != tt.want {
					t.Fatalf("%q, want %q", got, tt.want)
				}
				return
			}
			// A hashed name keeps what fits of the readable name and ends
			// in _ and 8 hex digits.
			if len(got) < 10 || got[len(got)-9] != '_' || strings.Trim(got[len(got)-8:], "0123456789abcdef") != "" {
				t.Fatalf("%q has no hash suffix", got)
			}
			if tt.prefix != "" && !strings.HasPrefix(got, tt.prefix+Separator) {
				t.Fatalf("%q lost its prefix", got)
			}
		})
	}
	// Names that sanitise alike stay apart.
	if exposedName("s", "s", "a.b") == exposedName("s", "s", "a b") {
		t.Fatal("a.b and a b collide")
	}
	if exposedName("s", "s", long+"1") == exposedName("s", "s", long+"2") {
		t.Fatal("two long names that differ at the end collide")
	}
}
