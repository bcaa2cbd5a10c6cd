package realtime

import (
	"testing"
)

func TestParseDone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		msg      string
		ok       bool
		usage    bool
		in, out  int64
		cached   int64
		audioIn  int64
		audioOut int64
		total    int64
	}{
		{"GA usage", `{"type":"response.done","response":{"id":"r1","status":"completed","usage":{"total_tokens":150,"input_tokens":100,"output_tokens":50,"input_token_details":{"text_tokens":60,"audio_tokens":40,"cached_tokens":20,"cached_tokens_details":{"text_tokens":20,"audio_tokens":0}},"output_token_details":{"text_tokens":10,"audio_tokens":40}}}}`,
			true, true, 100, 50, 20, 40, 40, 150},
		{"total missing", `{"type":"response.done","response":{"id":"r1","usage":{"input_tokens":3,"output_tokens":4}}}`, true, true, 3, 4, 0, 0, 0, 7},
		{"negative counts clamp", `{"type":"response.done","response":{"id":"r1","usage":{"input_tokens":-3,"output_tokens":4}}}`, true, true, 0, 4, 0, 0, 0, 4},
		{"no usage", `{"type":"response.done","response":{"id":"r1","status":"cancelled"}}`, true, false, 0, 0, 0, 0, 0, 0},
		{"repeated member", `{"type":"response.done","response":{"id":"r1","usage":{"input_tokens":1,"input_tokens":900}}}`, false, false, 0, 0, 0, 0, 0, 0},
		{"case variant", `{"type":"response.done","response":{"id":"r1","usage":{"input_tokens":1,"Input_tokens":900}}}`, false, false, 0, 0, 0, 0, 0, 0},
		{"not JSON", `{"type":"response.done",`, false, false, 0, 0, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := ParseDone([]byte(tc.msg))
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if (d.Usage != nil) != tc.usage || d.ID != "r1" {
				t.Fatalf("done %+v", d)
			}
			if d.Usage == nil {
				return
			}
			u := d.Usage
			if u.Tokens.PromptTokens != tc.in || u.Tokens.CompletionTokens != tc.out || u.Tokens.CachedTokens != tc.cached ||
				u.InputAudio != tc.audioIn || u.OutputAudio != tc.audioOut || u.Tokens.TotalTokens != tc.total {
				t.Errorf("usage %+v", u)
			}
		})
	}
}

// TestEventType: the type is read as a decoder reads it, so an escaped
// "response.done" is metered, wherever the member stands.
func TestEventType(t *testing.T) {
	for msg, want := range map[string]string{
		`{"type":"response.done"}`:                    "response.done",
		`{"delta":"AAAA\"type\"","type":"x.y"}`:       "x.y",
		`{"type":"response\u002edone","response":{}}`: "response.done",
		`{"nested":{"type":"inner"},"type":"outer"}`:  "outer",
		`{"type":1}`: "",
		`{}`:         "",
	} {
		if got := eventType([]byte(msg)); got != want {
			t.Errorf("%s: %q, want %q", msg, got, want)
		}
	}
}

func TestUsageAdd(t *testing.T) {
	var sum Usage
	u := Usage{InputAudio: 2, OutputText: 3}
	u.Tokens.PromptTokens = 5
	sum.Add(&u)
	sum.Add(&u)
	if sum.InputAudio != 4 || sum.OutputText != 6 || sum.Tokens.PromptTokens != 10 {
		t.Errorf("%+v", sum)
	}
}
