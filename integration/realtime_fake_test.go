package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
)

// fakeRealtime is an OpenAI Realtime server speaking the GA event
// format: session.created on connect; for every response.create a
// response.created, deltas text and audio in turn, and a response.done
// with usage split by modality.
type fakeRealtime struct {
	*httptest.Server
	// deltas is the number of text and of audio deltas per response.
	deltas int
	// flood makes the server send audio deltas of this many bytes
	// forever after session.created, counting what it wrote.
	flood int

	mu      sync.Mutex
	auth    []string // Authorization of each handshake
	headers []http.Header
	models  []string
	// received are the client events' types, in order.
	received []string
	sessions atomic.Int64
	written  atomic.Int64
	// closed receives the close status of each session as the server saw it.
	closed chan websocket.StatusCode
}

// realtimeUsage is the usage of every fake response.
const realtimeUsage = `{"total_tokens":150,"input_tokens":100,"output_tokens":50,` +
	`"input_token_details":{"text_tokens":60,"audio_tokens":40,"image_tokens":0,"cached_tokens":20,"cached_tokens_details":{"text_tokens":20,"audio_tokens":0,"image_tokens":0}},` +
	`"output_token_details":{"text_tokens":10,"audio_tokens":40}}`

func newFakeRealtime(t *testing.T) *fakeRealtime {
	f := &fakeRealtime{deltas: 3, closed: make(chan websocket.StatusCode, 16)}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeRealtime) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/realtime" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.headers = append(f.headers, r.Header.Clone())
	f.models = append(f.models, r.URL.Query().Get("model"))
	f.mu.Unlock()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 24)
	n := f.sessions.Add(1)
	ctx := context.Background()
	send := func(s string) error {
		err := c.Write(ctx, websocket.MessageText, []byte(s))
		if err == nil {
			f.written.Add(int64(len(s)))
		}
		return err
	}
	if send(fmt.Sprintf(`{"type":"session.created","event_id":"event_%d_0","session":{"type":"realtime","object":"realtime.session","id":"sess_%d","model":"gpt-realtime"}}`, n, n)) != nil {
		return
	}
	if f.flood > 0 {
		chunk := fmt.Sprintf(`{"type":"response.output_audio.delta","event_id":"e","response_id":"resp_x","item_id":"item_x","output_index":0,"content_index":0,"delta":"%s"}`, strings.Repeat("A", f.flood))
		for send(chunk) == nil {
		}
		f.closed <- -2
		return
	}
	resp := 0
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			f.closed <- websocket.CloseStatus(err)
			return
		}
		typ := gjson.GetBytes(msg, "type").Str
		f.mu.Lock()
		f.received = append(f.received, typ)
		f.mu.Unlock()
		if typ != "response.create" {
			continue
		}
		resp++
		id := fmt.Sprintf("resp_%d_%d", n, resp)
		if send(fmt.Sprintf(`{"type":"response.created","event_id":"ev_c_%s","response":{"id":"%s","object":"realtime.response","status":"in_progress","output":[]}}`, id, id)) != nil {
			return
		}
		for i := 0; i < f.deltas; i++ {
			if send(fmt.Sprintf(`{"type":"response.output_text.delta","event_id":"ev_t%d","response_id":"%s","item_id":"item_%s","output_index":0,"content_index":0,"delta":"t%d"}`, i, id, id, i)) != nil {
				return
			}
			audio := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("a%d", i)))
			if send(fmt.Sprintf(`{"type":"response.output_audio.delta","event_id":"ev_a%d","response_id":"%s","item_id":"item_%s","output_index":0,"content_index":1,"delta":"%s"}`, i, id, id, audio)) != nil {
				return
			}
		}
		if send(fmt.Sprintf(`{"type":"response.done","event_id":"ev_d_%s","response":{"id":"%s","object":"realtime.response","status":"completed","output":[],"usage":%s}}`, id, id, realtimeUsage)) != nil {
			return
		}
	}
}

// authSeen returns the Authorization headers of the handshakes so far.
func (f *fakeRealtime) authSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auth...)
}

// realtimeWait polls cond until it holds, failing the test after a
// deadline.
// socketLogLine waits for the gateway's log line that holds sub (a
// socket's one line, written when it closes) and returns it.
func socketLogLine(t *testing.T, sub string) string {
	t.Helper()
	var line string
	realtimeWait(t, "the socket's log line", func() bool {
		for _, l := range gatewayLogLines(t) {
			if strings.Contains(l, sub) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

func realtimeWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
