package gemini

import (
	"io"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

// FuzzGeminiStream feeds arbitrary bytes, split at arbitrary points, to
// the stream converter: it must neither panic nor hang.
func FuzzGeminiStream(f *testing.F) {
	for _, name := range []string{"stream_tools", "stream_error", "stream_truncated"} {
		f.Add(goldentest.Read(f, "testdata/"+name+".sse"), uint8(9))
	}
	f.Add([]byte("data: [{\"candidates\":[{\"index\":-5}]}]\n\n"), uint8(1))
	f.Add([]byte("data: {\"candidates\":[{\"index\":3,\"content\":{\"parts\":[{\"functionCall\":{\"args\":7}}]}}]}\r\n\r\n"), uint8(4))
	f.Add([]byte("{\"usageMetadata\":{\"promptTokenCount\":\"x\"}}\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		c := &providers.Call{Model: "m", Stream: true, Body: []byte(`{"stream_options":{"include_usage":true}}`)}
		conv := Chat{Provider: Slug}.Stream(c, io.Discard)
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
