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

// The Messages API's cost in the gateway, against a plain reverse_proxy
// in the same Caddy (benchSite), one request at a time in process:
//
//	go test ./integration/ -run '^$' -bench 'Messages' -benchtime 2000x -count 5
//
// (bench/messages.sh runs it and prints the ratios). Every benchmark's
// client sends the same Messages body and gets an answer of the same
// size from one mock (benchMessagesUpstream): the plain proxy and the
// native gateway get Anthropic's JSON or SSE, the translated gateway an
// OpenAI chat completion of the same text, which it turns into
// Anthropic's format.

// benchMessagesBody is the Messages request of the benchmarks.
const benchMessagesBody = `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`

// benchWords is the answer's text: 40 words in 20 stream chunks, like
// the shared harness's mock.
var benchWords = strings.Fields(strings.Repeat("lorem ipsum dolor sit amet consectetur adipiscing elit sed do ", 4))

// benchMessagesUpstream answers /v1/messages as Anthropic does and
// /v1/chat/completions as OpenAI does, JSON or stream (each event written
// and flushed on its own), with prerendered bodies: the mock's own cost
// is the same whichever path is measured.
func benchMessagesUpstream(b testing.TB) *httptest.Server {
	text := strings.Join(benchWords, " ")
	antJSON := fmt.Sprintf(`{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":15,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40}}`, text)
	var ant strings.Builder
	ant.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":15,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n")
	ant.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	ant.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	chat := fmt.Sprintf(`{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":15,"completion_tokens":40,"total_tokens":55}}`, text)
	var oai strings.Builder
	oai.WriteString(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := 0; i < len(benchWords); i += 2 {
		piece := benchWords[i] + " " + benchWords[i+1] + " "
		fmt.Fprintf(&ant, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", piece)
		fmt.Fprintf(&oai, "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", piece)
	}
	ant.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	ant.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":40}}\n\n")
	ant.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	oai.WriteString(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	oai.WriteString(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":15,"completion_tokens":40,"total_tokens":55}}` + "\n\n")
	oai.WriteString("data: [DONE]\n\n")
	bodies := map[string][2][]byte{
		"/v1/messages":         {[]byte(antJSON), []byte(ant.String())},
		"/v1/chat/completions": {[]byte(chat), []byte(oai.String())},
	}
	buf := make(chan []byte, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in []byte
		select {
		case in = <-buf:
		default:
			in = make([]byte, 0, 1024)
		}
		rb := bytes.NewBuffer(in[:0])
		_, _ = rb.ReadFrom(r.Body)
		pair, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if bytes.Contains(rb.Bytes(), []byte(`"stream":true`)) {
			// One write and flush per event, as providers (and the
			// shared harness's mock) send them.
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			fl := w.(http.Flusher)
			rest := pair[1]
			for len(rest) > 0 {
				i := bytes.Index(rest, []byte("\n\n")) + 2
				_, _ = w.Write(rest[:i])
				fl.Flush()
				rest = rest[i:]
			}
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(pair[0])))
			_, _ = w.Write(pair[0])
		}
		select {
		case buf <- rb.Bytes():
		default:
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchMessagesRequest is the request of one kind: "plain" through the
// reverse_proxy, "native" through the gateway to an Anthropic target,
// "translated" through the gateway to an OpenAI target.
func benchMessagesRequest(kind string, stream bool, upstream string) (string, []byte, http.Header) {
	body := benchMessagesBody
	if stream {
		body = strings.Replace(body, `{`, `{"stream":true,`, 1)
	}
	url := gatewayURL() + "/messages"
	hdr := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
	switch kind {
	case "plain":
		url = fmt.Sprintf("http://127.0.0.1:%d/plain/messages", httpPort)
		hdr.Set("X-Api-Key", anthropicKey)
	case "native":
		hdr.Set("X-Api-Key", anthropicKey)
		hdr.Set("X-Gateway-Api-Key", gatewayKey)
		hdr.Set("X-Gateway-Provider", "anthropic")
		hdr.Set("X-Gateway-Custom-Host", upstream)
	case "translated":
		hdr.Set("Authorization", "Bearer sk-test-provider")
		hdr.Set("X-Gateway-Api-Key", gatewayKey)
		hdr.Set("X-Gateway-Provider", "openai")
		hdr.Set("X-Gateway-Custom-Host", upstream+"/v1")
	}
	return url, []byte(body), hdr
}

// benchMessages measures one kind of Messages request.
func benchMessages(b *testing.B, kind string, stream bool) {
	up := benchMessagesUpstream(b)
	benchSite(b, up.Listener.Addr().String())
	url, body, hdr := benchMessagesRequest(kind, stream, up.URL)
	benchPost(b, url, body, hdr)
}

func BenchmarkMessagesPlainJSON(b *testing.B)        { benchMessages(b, "plain", false) }
func BenchmarkMessagesNativeJSON(b *testing.B)       { benchMessages(b, "native", false) }
func BenchmarkMessagesTranslatedJSON(b *testing.B)   { benchMessages(b, "translated", false) }
func BenchmarkMessagesPlainStream(b *testing.B)      { benchMessages(b, "plain", true) }
func BenchmarkMessagesNativeStream(b *testing.B)     { benchMessages(b, "native", true) }
func BenchmarkMessagesTranslatedStream(b *testing.B) { benchMessages(b, "translated", true) }

// TestMessagesBenchAnswers keeps the benchmarks honest: every kind of
// request gets a complete Messages answer of the same text (JSON, or 20
// text deltas ending in message_stop), so they compare like with like.
func TestMessagesBenchAnswers(t *testing.T) {
	up := benchMessagesUpstream(t)
	benchSite(t, up.Listener.Addr().String())
	text := strings.Join(benchWords, " ")
	for _, kind := range []string{"plain", "native", "translated"} {
		for _, stream := range []bool{false, true} {
			url, body, hdr := benchMessagesRequest(kind, stream, up.URL)
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header = hdr
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := string(raw)
			if resp.StatusCode != 200 ||
				(!stream && !strings.Contains(got, `"text":"`+text+`"`)) ||
				(stream && (!strings.HasSuffix(got, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || strings.Count(got, `"type":"text_delta"`) != 20)) {
				t.Fatalf("%s stream=%v: %d %s", kind, stream, resp.StatusCode, got)
			}
		}
	}
}
