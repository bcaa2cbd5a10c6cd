package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

func TestOpenAIChatStreamFirstEventBeforeUpstreamFinishes(t *testing.T) {
	up := newFakeOpenAI(t)
	gate := make(chan struct{})
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		usage := strings.Contains(string(body), `"include_usage":true`)
		writeChatStream(w, "gpt-4o-mini", []string{"Hel", "lo", "!"}, usage, gate)
		return true
	}
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "x-gateway-trace-id", "first-event-trace")
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("gpt-4o-mini"))
	defer stream.Close()

	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	// The upstream is still blocked on the gate: this chunk can only have
	// arrived if the gateway streams event by event.
	if got := stream.Current().Choices[0].Delta.Content; got != "Hel" {
		t.Fatalf("first chunk %q", got)
	}
	close(gate)
	var text strings.Builder
	text.WriteString("Hel")
	sawUsageChunk := false
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) == 0 {
			sawUsageChunk = true
			continue
		}
		text.WriteString(c.Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "Hello!" {
		t.Fatalf("text %q", text.String())
	}
	if sawUsageChunk {
		t.Fatal("the client did not ask for usage, but got the usage chunk the gateway requested")
	}
	if !strings.Contains(string(up.last().Body), `"include_usage":true`) {
		t.Fatal("the gateway should ask the provider for usage")
	}
	line := logLineFor(t, "first-event-trace")
	if !strings.Contains(line, `"total_tokens":12`) || !strings.Contains(line, `"stream":true`) || !strings.Contains(line, `"ttfb_ms"`) {
		t.Fatalf("log entry lacks stream usage: %v", line)
	}
}

func TestOpenAIChatStreamClientAskedForUsage(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	params := chatParams("gpt-4o-mini")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Usage.TotalTokens != 12 || acc.Choices[0].Message.Content != "Hello!" {
		t.Fatalf("usage %+v content %q", acc.Usage, acc.Choices[0].Message.Content)
	}
}

// TestUpstreamDiesMidStream: the provider's connection drops after the
// first event; the client must get an error event, not a silent cut.
func TestUpstreamDiesMidStream(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close() // reset, mid chunked body
		}
		return true
	}
	loadSite(t, site{})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	resp, raw := do(t, "POST", "/chat/completions", []byte(body), "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	s := string(raw)
	if !strings.Contains(s, `"content":"Hel"`) || !strings.Contains(s, `data: {"error":{`) {
		t.Fatalf("stream should end with an error event, got %q", s)
	}
	if strings.Contains(s, "[DONE]") {
		t.Fatalf("a failed stream must not claim completion: %q", s)
	}
}

// TestTruncatedStream: the provider ends its body cleanly but without
// [DONE]; the client is told the stream is incomplete.
func TestTruncatedStream(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n")
		return true
	}
	loadSite(t, site{})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	_, raw := do(t, "POST", "/chat/completions", []byte(body), "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if !strings.Contains(string(raw), `data: {"error":{`) {
		t.Fatalf("want an error event, got %q", raw)
	}
}

// TestReloadDuringStream reloads the config through the admin API while a
// stream is in flight: the stream completes and the new config applies.
func TestReloadDuringStream(t *testing.T) {
	up := newFakeOpenAI(t)
	gate := make(chan struct{})
	up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		writeChatStream(w, "m", []string{"a", "b", "c"}, false, gate)
		return true
	}
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL)
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams("m"))
	defer stream.Close()
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}

	// Reload through the admin API, as an operator would, adding a key
	// (on a new port, so the next request cannot race the old listener).
	newHTTPPort()
	newSite := site{LLM: "api_key second second-key-0123456789"}
	cfg, err := adapt(newSite.caddyfile())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://localhost:"+itoa(adminPort)+"/load", strings.NewReader(string(cfg)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %d", resp.StatusCode)
	}
	close(gate)
	n := 1
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream cut by reload: %v", err)
	}
	if n < 4 {
		t.Fatalf("got %d chunks", n)
	}
	r2, _ := do(t, "GET", "/models", nil, "x-gateway-api-key", "second-key-0123456789", "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if r2.StatusCode == 401 {
		t.Fatal("the reloaded config's key is not accepted")
	}
}
