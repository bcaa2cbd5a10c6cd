package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// bigPromptBody is the bench harness's chat request with its user message
// padded to about 200 KB (PROMPT_BYTES=200000): what the gateway does to
// a large body on the way in shows here, against a plain reverse_proxy
// that only streams it.
func bigPromptBody(stream bool) []byte {
	return fmt.Appendf(nil, `{"model":"gpt-4o-mini","stream":%t,"max_tokens":256,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one short sentence about benchmarks. %s"}]}`,
		stream, strings.Repeat("x", 200000))
}

// newSinkOpenAI is an upstream that reads and drops the request body and
// gives a fixed answer, so the benchmark measures the gateway, not the
// fake (newFakeOpenAI keeps and decodes every body).
func newSinkOpenAI(b *testing.B) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head := make([]byte, 64)
		n, _ := io.ReadFull(r.Body, head)
		_, _ = io.Copy(io.Discard, r.Body)
		if bytes.Contains(head[:n], []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, part := range []string{"Hel", "lo", "!"} {
				fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", part)
			}
			io.WriteString(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`)
	}))
	b.Cleanup(s.Close)
	return s
}

// benchBigPrompt posts the 200 KB prompt (whole or streamed) b.N times.
func benchBigPrompt(b *testing.B, url string, hdr http.Header, stream bool) {
	body := bigPromptBody(stream)
	b.SetBytes(int64(len(body)))
	benchPost(b, url, body, hdr)
}

// BenchmarkGatewayChatBigPrompt is a chat completion with a 200 KB prompt
// through llm_gateway, whole and streamed;
// BenchmarkPlainReverseProxyChatBigPrompt is its baseline.
func BenchmarkGatewayChatBigPrompt(b *testing.B) {
	up := newSinkOpenAI(b)
	benchSite(b, up.Listener.Addr().String())
	hdr := http.Header{
		"Content-Type":          {"application/json"},
		"Authorization":         {"Bearer sk-test-provider"},
		"X-Gateway-Api-Key":     {gatewayKey},
		"X-Gateway-Provider":    {"openai"},
		"X-Gateway-Custom-Host": {up.URL},
	}
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%t", stream), func(b *testing.B) {
			benchBigPrompt(b, gatewayURL()+"/chat/completions", hdr, stream)
		})
	}
}

// BenchmarkPlainReverseProxyChatBigPrompt is the same requests through a
// plain Caddy reverse_proxy.
func BenchmarkPlainReverseProxyChatBigPrompt(b *testing.B) {
	up := newSinkOpenAI(b)
	benchSite(b, up.Listener.Addr().String())
	hdr := http.Header{
		"Content-Type":  {"application/json"},
		"Authorization": {"Bearer sk-test-provider"},
	}
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%t", stream), func(b *testing.B) {
			benchBigPrompt(b, fmt.Sprintf("http://127.0.0.1:%d/plain/chat/completions", httpPort), hdr, stream)
		})
	}
}
