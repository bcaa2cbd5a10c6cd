package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHardeningDeepNestingBody: a chat body of ~6 million nested "[" (12
// MB, under the request limit) is a 400 envelope, and the process is
// still serving afterwards (it used to die of a stack overflow).
func TestHardeningDeepNestingBody(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	const n = 6_000_000
	deep := append(append([]byte(`{"model":"m","messages":`), bytes.Repeat([]byte("["), n)...), bytes.Repeat([]byte("]"), n)...)
	deep = append(deep, '}')
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
	resp, raw := do(t, "POST", "/chat/completions", deep, hdr...)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), `"error"`) || !strings.Contains(string(raw), "128") {
		t.Fatalf("status %d body %.300s", resp.StatusCode, raw)
	}
	if up.count() != 0 {
		t.Fatal("the body must not reach the provider")
	}
	resp, raw = do(t, "POST", "/chat/completions", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), hdr...)
	if resp.StatusCode != 200 {
		t.Fatalf("gateway not serving after the deep body: %d %s", resp.StatusCode, raw)
	}
}

// TestHardeningInferenceBodyChecks: every inference endpoint answers 400
// for invalid UTF-8, a body too deep, or JSON that is not an object.
func TestHardeningInferenceBodyChecks(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
	bodies := []struct {
		name string
		body []byte
	}{
		{"invalid UTF-8", []byte("{\"model\":\"m\",\"input\":\"\xff\xfe\"}")},
		{"too deep", []byte(`{"model":"m","input":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`)},
		{"not an object", []byte(`["model"]`)},
	}
	paths := []string{"/chat/completions", "/completions", "/embeddings", "/responses", "/images/generations", "/audio/speech"}
	for _, b := range bodies {
		for _, p := range paths {
			resp, raw := do(t, "POST", p, b.body, hdr...)
			var env struct {
				Error struct{ Message string } `json:"error"`
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(raw, &env) != nil || env.Error.Message == "" {
				t.Errorf("%s %s: status %d body %.200s", b.name, p, resp.StatusCode, raw)
			}
		}
	}
	if up.count() != 0 {
		t.Fatalf("%d bad bodies reached the provider", up.count())
	}
}

// TestHardeningStreamLineEndings: CRLF and CR streams (valid SSE) pass
// through event by event, byte for byte, with no false error event after
// [DONE], and their usage is read.
func TestHardeningStreamLineEndings(t *testing.T) {
	events := []string{
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
		`data: [DONE]`,
	}
	for _, eol := range []struct{ name, eol string }{{"CRLF", "\r\n"}, {"CR", "\r"}} {
		t.Run(eol.name, func(t *testing.T) {
			up := newFakeOpenAI(t)
			gate := make(chan struct{})
			up.Hook = func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				for i, ev := range events {
					io.WriteString(w, ev+eol.eol+eol.eol)
					w.(http.Flusher).Flush()
					if i == 0 {
						<-gate // the first event must reach the client before the rest is sent
					}
				}
				return true
			}
			loadSite(t, site{})
			body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
			req, _ := http.NewRequest("POST", gatewayURL()+"/chat/completions", strings.NewReader(body))
			for k, v := range map[string]string{"x-gateway-api-key": gatewayKey, "x-gateway-provider": "openai", "x-gateway-custom-host": up.URL, "Authorization": "Bearer sk-test-provider", "Content-Type": "application/json"} {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := events[0] + eol.eol + eol.eol
			buf := make([]byte, len(first))
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != first {
				close(gate)
				t.Fatalf("first event not passed on its own: %q %v", buf, err)
			}
			close(gate)
			rest, _ := io.ReadAll(resp.Body)
			want := strings.Join(events, eol.eol+eol.eol) + eol.eol + eol.eol
			if got := string(buf) + string(rest); got != want {
				t.Fatalf("stream changed:\n got %q\nwant %q", got, want)
			}
			lines := gatewayLogLines(t)
			if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"total_tokens":5`) {
				t.Fatalf("usage not read from the %s stream: %v", eol.name, lines)
			}
		})
	}
}
