package prompts

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRenderedTextIsValidJSON: rendered text reaches the provider as JSON
// strings written by the module's one string writer, so text that is not
// valid UTF-8 becomes U+FFFD (as encoding/json does) instead of making
// the request body invalid JSON, and nothing is HTML-escaped.
func TestRenderedTextIsValidJSON(t *testing.T) {
	cases := []struct {
		name    string
		content string // the message content, a JSON value
		value   string // the variable x
	}{
		{"invalid utf-8 in a variable", `"a {{x}} b"`, "bad\xffutf8"},
		{"truncated rune", `"{{x}}"`, "caf\xc3"},
		{"line separators", `"{{x}}"`, "sep\u2028\u2029"},
		{"controls and quotes", `"{{x}}"`, "q\"b\\s\x00\x1f\n\t"},
		{"html is not escaped", `"{{x}}"`, "<b>&</b>"},
		{"text part", `[{"type":"text","text":"{{x}}","cache_control":{"type":"ephemeral"}}]`, "bad\xff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs, err := compileMessages([]Message{{Role: "user", Content: json.RawMessage(tc.content)}}, "")
			if err != nil {
				t.Fatal(err)
			}
			out, err := renderMessages(nil, msgs, map[string]any{"x": tc.value})
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %q", out)
			}
			if strings.Contains(tc.value, "<") && !strings.Contains(string(out), "<b>&</b>") {
				t.Fatalf("HTML-escaped: %s", out)
			}
			var back []struct {
				Content json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			want := strings.ToValidUTF8(tc.value, "\uFFFD")
			if !strings.Contains(decodeText(t, back[0].Content), want) {
				t.Fatalf("rendered %s, want it to hold %q", back[0].Content, want)
			}
		})
	}
}

// decodeText returns a content's text: the string, or its first part's.
func decodeText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) == 0 {
		t.Fatalf("content %s: %v", raw, err)
	}
	return parts[0].Text
}
