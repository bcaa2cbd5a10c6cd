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
			got, added := WithStreamUsage([]byte(tt.body))
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

func BenchmarkWithStreamUsage(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about benchmarks."}]}`)
	b.ReportAllocs()
	for b.Loop() {
		WithStreamUsage(body)
	}
}
