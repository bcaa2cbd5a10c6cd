package providers

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestWithStreamUsage(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // "" when unchanged
	}{
		{"no stream_options", `{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"white space after the object", "{\"stream\":true}\n \t", `{"stream":true,"stream_options":{"include_usage":true}}`},
		{"white space before the brace", "{\"stream\":true \n}", `{"stream":true,"stream_options":{"include_usage":true}}`},
		{"empty object", `{}`, `{"stream_options":{"include_usage":true}}`},
		{"a brace inside a string", `{"messages":[{"content":"}"}]}`, `{"messages":[{"content":"}"}],"stream_options":{"include_usage":true}}`},
		{"stream_options without include_usage", `{"stream_options":{"x":1}}`, `{"stream_options":{"x":1,"include_usage":true}}`},
		{"include_usage false", `{"stream_options":{"include_usage":false}}`, `{"stream_options":{"include_usage":true}}`},
		{"include_usage already true", `{"stream_options":{"include_usage":true}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head, tail, partsAdded := StreamUsageParts([]byte(tt.body))
			got, added := WithStreamUsage([]byte(tt.body))
			if joined := string(head) + string(tail); joined != string(got) || partsAdded != added {
				t.Fatalf("parts %q + %q (added=%v), joined %q (added=%v)", head, tail, partsAdded, got, added)
			}
			if tt.want == "" {
				if added || string(got) != tt.body {
					t.Fatalf("changed to %s (added=%v)", got, added)
				}
				return
			}
			if !added {
				t.Fatal("not reported as added")
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("invalid JSON %s: %v", got, err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestStreamUsagePartsSendsBodyInPlace: without stream_options the head
// is the client's body itself, not a copy (a 200 KB prompt is not copied
// to add 40 bytes), and appending to it cannot write into that body.
func TestStreamUsagePartsSendsBodyInPlace(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}   `)
	head, tail, added := StreamUsageParts(body)
	if !added || &head[0] != &body[0] || string(tail) != `,"stream_options":{"include_usage":true}}   ` {
		t.Fatalf("head %q (aliases body: %v), tail %q, added %v", head, &head[0] == &body[0], tail, added)
	}
	if cap(head) != len(head) {
		t.Fatalf("head has capacity %d beyond its %d bytes: an append would overwrite the body", cap(head), len(head))
	}
}

func BenchmarkWithStreamUsage(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about benchmarks."}]}`)
	b.ReportAllocs()
	for b.Loop() {
		WithStreamUsage(body)
	}
}
