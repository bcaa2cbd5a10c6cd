package realtime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// pair is a relay under test: a fake provider (script), a relay server
// running a Session per connection, and the totals of each session.
type pair struct {
	up, relay *httptest.Server
	meter     *fakeMeter
	totals    chan Totals
	hub       Hub
}

// newPair starts a provider running script on each connection and a
// relay in front of it with limits.
func newPair(t testing.TB, limits Limits, script func(ctx context.Context, c *websocket.Conn)) *pair {
	p := &pair{meter: &fakeMeter{}, totals: make(chan Totals, 2048)}
	p.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.SetReadLimit(1 << 24)
		script(r.Context(), c)
	}))
	p.relay = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up, _, err := websocket.Dial(r.Context(), p.up.URL, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			up.CloseNow()
			return
		}
		s := NewSession(c, up, limits, p.meter)
		p.hub.Add(s)
		defer p.hub.Remove(s)
		p.totals <- s.Run(r.Context())
	}))
	t.Cleanup(func() {
		p.hub.Shutdown(0, false)
		p.relay.Close()
		p.up.Close()
	})
	return p
}

func (p *pair) dial(t testing.TB) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), p.relay.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 24)
	return c
}

// fakeMeter records what it billed and refuses after allow responses
// (allow < 0: never).
type fakeMeter struct {
	mu     sync.Mutex
	allow  int
	opened []string
	closed []Done
}

func (m *fakeMeter) Open(id string) (Charge, *Refusal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.allow >= 0 && len(m.opened) >= m.allow {
		return nil, &Refusal{Type: "insufficient_quota", Code: "budget_exceeded", Message: "spent", Status: 412}
	}
	m.opened = append(m.opened, id)
	return fakeCharge{m}, nil
}

type fakeCharge struct{ m *fakeMeter }

func (c fakeCharge) Close(d Done) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.closed = append(c.m.closed, d)
}

const doneEvent = `{"type":"response.done","response":{"id":"%s","status":"completed","usage":{"total_tokens":15,"input_tokens":10,"output_tokens":5,"input_token_details":{"text_tokens":4,"audio_tokens":6,"cached_tokens":2},"output_token_details":{"text_tokens":1,"audio_tokens":4}}}}`

// responder answers each response.create with created, two deltas and
// done, numbering responses.
func responder(ctx context.Context, c *websocket.Conn) {
	n := 0
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		if !strings.Contains(string(msg), "response.create") {
			continue
		}
		n++
		id := fmt.Sprintf("resp_%d", n)
		for _, ev := range []string{
			`{"type":"response.created","response":{"id":"` + id + `","status":"in_progress"}}`,
			`{"type":"response.output_text.delta","delta":"a"}`,
			`{"type":"response.output_audio.delta","delta":"AAAA"}`,
			fmt.Sprintf(doneEvent, id),
		} {
			if c.Write(ctx, websocket.MessageText, []byte(ev)) != nil {
				return
			}
		}
	}
}

func readType(t *testing.T, c *websocket.Conn) (string, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, msg, err := c.Read(ctx)
	return eventType(msg), msg, err
}

// TestSessionMeters relays two responses and checks each was reserved at
// response.created and settled with its usage at response.done, in
// order, and the totals.
func TestSessionMeters(t *testing.T) {
	p := newPair(t, Limits{}, responder)
	p.meter.allow = -1
	c := p.dial(t)
	ctx := context.Background()
	var got []string
	for i := 0; i < 2; i++ {
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create"}`)); err != nil {
			t.Fatal(err)
		}
		for {
			typ, _, err := readType(t, c)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, typ)
			if typ == "response.done" {
				break
			}
		}
	}
	want := "response.created,response.output_text.delta,response.output_audio.delta,response.done"
	if strings.Join(got, ",") != want+","+want {
		t.Errorf("events %v", got)
	}
	c.Close(websocket.StatusNormalClosure, "bye")
	tot := <-p.totals
	if tot.Responses != 2 || tot.Usage.Tokens.PromptTokens != 20 || tot.Usage.OutputAudio != 8 || tot.Cause != CauseClientClosed || tot.MessagesIn != 2 || tot.MessagesOut != 8 {
		t.Errorf("totals %+v", tot)
	}
	if len(p.meter.opened) != 2 || len(p.meter.closed) != 2 || p.meter.closed[1].ID != "resp_2" || p.meter.closed[1].Usage.Tokens.TotalTokens != 15 {
		t.Errorf("billed %v / %+v", p.meter.opened, p.meter.closed)
	}
}

// TestSessionRefusal: a response the meter refuses never reaches the
// client; the client gets the error event and 1008, the provider a
// response.cancel.
func TestSessionRefusal(t *testing.T) {
	cancelled := make(chan string, 1)
	p := newPair(t, Limits{}, func(ctx context.Context, c *websocket.Conn) {
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.created","response":{"id":"resp_x"}}`))
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.output_text.delta","delta":"secret"}`))
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if eventType(msg) == "response.cancel" {
				cancelled <- string(msg)
			}
		}
	})
	p.meter.allow = 0
	c := p.dial(t)
	typ, msg, err := readType(t, c)
	if err != nil || typ != "error" || !strings.Contains(string(msg), `"code":"budget_exceeded"`) {
		t.Fatalf("first event %s %v, want the error event", msg, err)
	}
	_, msg, err = readType(t, c)
	if websocket.CloseStatus(err) != ClosePolicy {
		t.Errorf("then %s %v, want close 1008", msg, err)
	}
	select {
	case m := <-cancelled:
		if !strings.Contains(m, `"response_id":"resp_x"`) {
			t.Errorf("cancel %s", m)
		}
	case <-time.After(10 * time.Second):
		t.Error("the provider got no response.cancel")
	}
	if tot := <-p.totals; tot.Cause != CauseRefused || tot.Code != ClosePolicy {
		t.Errorf("totals %+v", tot)
	}
}

// TestSessionEnds: each way a session ends, and the close each side
// gets.
func TestSessionEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		script func(ctx context.Context, c *websocket.Conn)
		client func(t *testing.T, c *websocket.Conn)
		code   websocket.StatusCode
		cause  string
	}{
		{"provider closes", Limits{}, func(ctx context.Context, c *websocket.Conn) {
			c.Close(4001, "provider says bye")
		}, nil, 4001, CauseUpstreamClosed},
		{"idle", Limits{Idle: 50 * time.Millisecond}, func(ctx context.Context, c *websocket.Conn) { _, _, _ = c.Read(ctx) }, nil, ClosePolicy, CauseIdle},
		{"session duration", Limits{MaxSession: 50 * time.Millisecond}, func(ctx context.Context, c *websocket.Conn) { _, _, _ = c.Read(ctx) }, nil, ClosePolicy, CauseExpired},
		{"message too big from the provider", Limits{MaxMessage: 1024}, func(ctx context.Context, c *websocket.Conn) {
			_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"x","delta":"`+strings.Repeat("A", 4096)+`"}`))
			_, _, _ = c.Read(ctx)
		}, nil, CloseTooBig, CauseTooBig},
		{"unreadable response.done", Limits{}, func(ctx context.Context, c *websocket.Conn) {
			_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.done","response":{"id":"r","usage":{"input_tokens":1,"input_tokens":1000}}}`))
			_, _, _ = c.Read(ctx)
		}, nil, CloseUpstream, CauseInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, tc.limits, tc.script)
			p.meter.allow = -1
			c := p.dial(t)
			var err error
			for err == nil {
				_, _, err = readType(t, c)
			}
			if got := websocket.CloseStatus(err); got != tc.code {
				t.Errorf("client closed with %v (%v), want %v", got, err, tc.code)
			}
			if tot := <-p.totals; tot.Cause != tc.cause {
				t.Errorf("cause %q, want %q", tot.Cause, tc.cause)
			}
		})
	}
}

// TestSessionGoAway: a hub's shutdown ends its sessions with 1001.
func TestSessionGoAway(t *testing.T) {
	p := newPair(t, Limits{}, func(ctx context.Context, c *websocket.Conn) { _, _, _ = c.Read(ctx) })
	c := p.dial(t)
	deadline := time.Now().Add(10 * time.Second)
	for p.hub.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.hub.Shutdown(0, false)
	_, _, err := readType(t, c)
	if websocket.CloseStatus(err) != CloseGoingAway {
		t.Errorf("%v, want 1001", err)
	}
	if tot := <-p.totals; tot.Cause != CauseShutdown {
		t.Errorf("cause %q", tot.Cause)
	}
}
