package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/handlers"
)

// reply is one scripted upstream answer.
type reply struct {
	status  int
	headers map[string]string
	body    string
	// hang: write nothing and wait for the gateway to give up.
	hang bool
	// partial: send headers and this much of a JSON body, then hang.
	partial string
	// stream: answer a chat stream with these parts; pause waits before
	// every part after the first (a real wait: the stream is slow).
	stream []string
	pause  time.Duration
	// resetAfterFirst: send the first stream event, then reset the
	// connection.
	resetAfterFirst bool
}

// scripted is a fake OpenAI provider that answers chat completions from a
// script, one reply per request in order (the last one repeats), and
// answers normally when the script is empty.
type scripted struct {
	*fakeOpenAI
	mu      sync.Mutex
	replies []reply
	n       int
}

func newScripted(t testing.TB, replies ...reply) *scripted {
	s := &scripted{fakeOpenAI: newFakeOpenAI(t), replies: replies}
	s.Hook = s.hook
	return s
}

// set replaces the script; later requests follow it from its start.
func (s *scripted) set(replies ...reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies, s.n = replies, 0
}

func (s *scripted) hook(w http.ResponseWriter, r *http.Request, body []byte) bool {
	s.mu.Lock()
	if len(s.replies) == 0 || r.URL.Path != "/v1/chat/completions" {
		s.mu.Unlock()
		return false
	}
	rp := s.replies[min(s.n, len(s.replies)-1)]
	s.n++
	s.mu.Unlock()
	for k, v := range rp.headers {
		w.Header().Set(k, v)
	}
	switch {
	case rp.hang:
		<-r.Context().Done()
	case rp.partial != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, rp.partial)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case rp.resetAfterFirst:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	case rp.stream != nil:
		gate := make(chan struct{})
		go func() {
			time.Sleep(rp.pause * time.Duration(len(rp.stream)))
			close(gate)
		}()
		writeChatStream(w, "m", rp.stream, strings.Contains(string(body), `"include_usage":true`), gate)
	case rp.status != 0:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rp.status)
		b := rp.body
		if b == "" {
			b = fmt.Sprintf(`{"error":{"message":"scripted %d","type":"server_error","param":null,"code":null}}`, rp.status)
		}
		io.WriteString(w, b)
	default:
		return false
	}
	return true
}

// target is a config target reaching up with the test provider key.
func target(up *fakeOpenAI, extra string) string {
	t := fmt.Sprintf(`{"provider":"openai","api_key":"sk-test-provider","custom_host":%q`, up.URL)
	if extra != "" {
		t += "," + extra
	}
	return t + "}"
}

const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`

// chat sends a chat completion with a config header and extra headers.
func chat(t testing.TB, config string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	return do(t, "POST", "/chat/completions", []byte(chatBody), append([]string{"x-gateway-config", compactJSON(t, config)}, headers...)...)
}

// compactJSON removes the layout from a config written across lines, as
// header values cannot hold newlines.
func compactJSON(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("config is not JSON: %v\n%s", err, s)
	}
	return b.String()
}

// lastAttempts returns the attempts of the newest log entry as
// "target:outcome:status" items.
func lastAttempts(t testing.TB) string {
	t.Helper()
	lines := gatewayLogLines(t)
	if len(lines) == 0 {
		t.Fatal("no log entry")
	}
	var e struct {
		Attempts []struct {
			Target  string `json:"target"`
			Outcome string `json:"outcome"`
			Status  int    `json:"status"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range e.Attempts {
		out = append(out, fmt.Sprintf("%s:%s:%d", a.Target, a.Outcome, a.Status))
	}
	return strings.Join(out, " ")
}

// wantHeaders checks the gateway's response headers.
func wantHeaders(t testing.TB, resp *http.Response, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		if got := resp.Header.Get(kv[i]); got != kv[i+1] {
			t.Errorf("%s = %q, want %q", kv[i], got, kv[i+1])
		}
	}
}

// testClock is a clock the test moves by hand, installed as the clock of
// the gateway's breakers and cache for the test's duration.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func useTestClock(t testing.TB) *testClock {
	c := &testClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	t.Cleanup(handlers.SetClock(c.now))
	return c
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
