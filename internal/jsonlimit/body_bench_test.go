package jsonlimit_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// bigChat is the benchmark harness's chat request with its user message
// padded to about 200 KB (run.sh's PROMPT_BYTES=200000).
func bigChat(stream bool) []byte {
	return fmt.Appendf(nil, `{"model":"gpt-4o-mini","stream":%t,"max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about benchmarks. %s"}]}`,
		stream, strings.Repeat("x", 200000))
}

// BenchmarkBigPromptSteps drives a 200 KB chat body through each step
// that walks a whole request body on its way in, in the order the gateway
// takes them: the bounded check of every inference body
// (handlers.checkJSONObject), the model and stream fields
// (handlers.readModelStream), and for a stream to an OpenAI-format
// provider the usage request (providers.WithStreamUsage). "all" is the
// sum a streamed request pays.
func BenchmarkBigPromptSteps(b *testing.B) {
	steps := []struct {
		name   string
		stream bool
		run    func(b *testing.B, body []byte)
	}{
		{"check", false, func(b *testing.B, body []byte) {
			if err := jsonlimit.Object(body); err != nil {
				b.Fatal(err)
			}
		}},
		{"model-stream", true, func(b *testing.B, body []byte) {
			if gjson.GetBytes(body, "model").String() == "" || !gjson.GetBytes(body, "stream").Bool() {
				b.Fatal("no model or stream")
			}
		}},
		{"stream-usage", true, func(b *testing.B, body []byte) {
			if _, added := providers.WithStreamUsage(body); !added {
				b.Fatal("usage not requested")
			}
		}},
		{"all", true, func(b *testing.B, body []byte) {
			if err := jsonlimit.Object(body); err != nil {
				b.Fatal(err)
			}
			if gjson.GetBytes(body, "model").String() == "" || !gjson.GetBytes(body, "stream").Bool() {
				b.Fatal("no model or stream")
			}
			if _, added := providers.WithStreamUsage(body); !added {
				b.Fatal("usage not requested")
			}
		}},
	}
	for _, st := range steps {
		body := bigChat(st.stream)
		b.Run(st.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				st.run(b, body)
			}
		})
	}
}
