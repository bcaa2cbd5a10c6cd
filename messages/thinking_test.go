package messages

import (
	"bytes"
	"strings"
	"testing"
)

// Thinking blocks a translated target produced (empty signature) are
// taken out of assistant turns before any target sees them; signed ones,
// redacted ones, user turns and bodies without any stay as sent, and the
// parsed request tells which bodies need it.
func TestStripUnsignedThinking(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"no thinking", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ""},
		{"signed kept",
			`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"EqQBCkgIARAB"},{"type":"text","text":"b"}]}]}`, ""},
		{"unsigned stripped",
			`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`,
			`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":"c"}]}`},
		{"several turns, several blocks, pretty",
			`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"1","signature": ""},{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"thinking","thinking":"2","signature":""}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]},{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"thinking","thinking":"3","signature":""},{"type":"text","text":"done"}]}]}`,
			`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]},{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"text","text":"done"}]}]}`},
		{"a turn of thinking only is left", `{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""}]}]}`, ""},
		{"user text mentioning it", `{"messages":[{"role":"user","content":"\"signature\":\"\""}]}`, ""},
		{"not JSON", `{"messages":[{"role":"assistant","content":[{"type":"thinking","signature":""`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(c.in)
			got := StripUnsignedThinking(in)
			want := c.want
			if want == "" {
				want = c.in
				if &got[0] != &in[0] {
					t.Fatal("an unchanged body was copied")
				}
			}
			if string(got) != strings.ReplaceAll(want, "\n", "") {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
			if !bytes.Equal(in, []byte(c.in)) {
				t.Fatal("the input was modified")
			}
			// The parsed request says whether there is anything to strip.
			if r, err := decode(in); err == nil && c.name != "not JSON" && r.UnsignedThinking() != (c.want != "") {
				t.Fatalf("UnsignedThinking() = %v", r.UnsignedThinking())
			}
		})
	}
}

// Both names OpenAI-compatible servers give reasoning become a thinking
// block with an empty signature, in answers and streams:
// reasoning_content (DeepSeek, vLLM) and reasoning (Groq's parsed
// format, OpenRouter, Ollama).
func TestReasoningToThinking(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		chat := `{"id":"c","model":"m","choices":[{"message":{"role":"assistant","` + field + `":"Think.","content":"Yes."},"finish_reason":"stop"}]}`
		got, err := FromChat([]byte(chat), "m", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), `"content":[{"type":"thinking","thinking":"Think.","signature":""},{"type":"text","text":"Yes."}]`) {
			t.Fatalf("%s: %s", field, got)
		}
		var out bytes.Buffer
		s := NewStreamWriter(&out, "m", nil)
		_, _ = s.Write([]byte(chatSSE(`{"id":"c","choices":[{"index":0,"delta":{"`+field+`":"Th"}}]}`,
			`{"id":"c","choices":[{"index":0,"delta":{"`+field+`":"ink."}}]}`,
			`{"id":"c","choices":[{"index":0,"delta":{"content":"Yes."},"finish_reason":"stop"}]}`, `[DONE]`)))
		if err := s.Close(nil); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`"content_block":{"type":"thinking","thinking":"","signature":""}`,
			`"delta":{"type":"thinking_delta","thinking":"Th"}`,
			`"delta":{"type":"thinking_delta","thinking":"ink."}`,
			`"index":1,"content_block":{"type":"text","text":""}`,
		} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("%s: stream lacks %s:\n%s", field, want, out.String())
			}
		}
	}
}
