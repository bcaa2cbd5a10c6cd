package cohere

import (
	"io"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

// FuzzCohereStream feeds arbitrary bytes, split at arbitrary points, to
// the stream converter: it must neither panic nor hang.
func FuzzCohereStream(f *testing.F) {
	for _, name := range []string{"stream_tools.sse", "stream_text.ndjson", "stream_truncated.sse"} {
		f.Add(goldentest.Read(f, "testdata/"+name), uint8(5))
	}
	f.Add([]byte("{\"type\":\"tool-call-delta\",\"index\":-1,\"delta\":{\"message\":{\"tool_calls\":{\"function\":{\"arguments\":\"x\"}}}}}\n"), uint8(1))
	f.Add([]byte("{\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"ERROR\",\"usage\":{\"tokens\":7}}}\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		c := &providers.Call{Model: "m", Stream: true, Body: []byte(`{"stream_options":{"include_usage":true}}`)}
		conv := chat{}.Stream(c, io.Discard)
		n := int(split%64) + 1
		for len(in) > 0 {
			k := min(n, len(in))
			if _, err := conv.Write(in[:k]); err != nil {
				t.Fatal(err)
			}
			in = in[k:]
		}
		_ = conv.Close()
		_ = conv.Usage()
	})
}
