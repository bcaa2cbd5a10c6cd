package realtime

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Meter bills a session's responses: the gateway's rate limits, usage
// limits, ledger and prices stand behind it.
type Meter interface {
	// Open reserves response id (as response.created names it) on the
	// caller's limits. A refusal ends the session: the client gets it
	// as an error event, and the response is cancelled upstream.
	Open(id string) (Charge, *Refusal)
}

// Charge is one response's reservation.
type Charge interface {
	// Close settles the reservation with what response.done said of the
	// response: d.Usage nil when the session ended before its usage was
	// known (the reservation is then kept as the charge).
	Close(d Done)
}

// Totals are what a session relayed and billed, for its log line.
type Totals struct {
	// In counts client → provider, Out provider → client.
	MessagesIn, MessagesOut int64
	BytesIn, BytesOut       int64
	// Responses counts the responses billed; Usage sums their usage.
	Responses int64
	Usage     Usage
	// Cause says why the session ended (one of the Cause constants),
	// and Code and Reason are the close the client was sent (or, when
	// the client closed, sent).
	Cause  string
	Code   websocket.StatusCode
	Reason string
}

// Causes of a session's end, as logged.
const (
	CauseClientClosed   = "client_closed"
	CauseUpstreamClosed = "upstream_closed"
	CauseUpstreamFailed = "upstream_failed"
	CauseClientGone     = "client_gone"
	CauseRefused        = "refused"
	CauseIdle           = "idle_timeout"
	CauseExpired        = "session_expired"
	CauseSlowClient     = "slow_client"
	CauseSlowUpstream   = "slow_upstream"
	CauseTooBig         = "message_too_big"
	CauseShutdown       = "shutdown"
	CauseInvalid        = "invalid_event"
)

// Session relays one client socket to one provider socket.
type Session struct {
	client, upstream *websocket.Conn
	limits           Limits
	meter            Meter

	// lastActive is when either side last sent a message (Unix ns).
	lastActive atomic.Int64
	bytesIn    atomic.Int64
	bytesOut   atomic.Int64
	msgsIn     atomic.Int64
	msgsOut    atomic.Int64

	endOnce sync.Once
	ended   chan struct{}
	ending  ending

	// pending holds the reservations of responses created and not yet
	// done. Only the provider's pump touches it while the session runs.
	pending   map[string]Charge
	responses int64
	usage     Usage
}

// ending is how a session ends.
type ending struct {
	cause string
	// toClient and toUpstream are the close codes each side is sent;
	// closeNow means the side gets no close handshake (it is gone or
	// does not read).
	toClient, toUpstream websocket.StatusCode
	reason               string
	// refusal, when set, is sent to the client as an error event first.
	refusal *Refusal
	// cancel names a response to cancel upstream before the close.
	cancel string
	// streamID is the Responses WebSocket lane the refusal answers.
	streamID string
}

// closeNow marks a side that gets no close handshake.
const closeNow websocket.StatusCode = -1

// NewSession relays client to upstream under limits (filled with their
// defaults), billing responses through meter.
func NewSession(client, upstream *websocket.Conn, limits Limits, meter Meter) *Session {
	s := &Session{client: client, upstream: upstream, limits: limits.Fill(), meter: meter, ended: make(chan struct{})}
	s.client.SetReadLimit(s.limits.MaxMessage)
	s.upstream.SetReadLimit(s.limits.MaxMessage)
	return s
}

// Run relays until either side closes or a bound ends the session, and
// returns its totals. Responses still open at the end are settled
// without usage. ctx ending ends the session as a shutdown does.
func (s *Session) Run(ctx context.Context) Totals {
	openSessions.Inc()
	defer openSessions.Dec()
	s.lastActive.Store(time.Now().UnixNano())
	// The pumps' context ends only after the session did: the library
	// closes a connection whose read context ends, and the session must
	// send its error event and close codes first.
	pumpCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	expire := time.AfterFunc(s.limits.MaxSession, func() {
		s.end(ending{cause: CauseExpired, toClient: ClosePolicy, toUpstream: websocket.StatusNormalClosure, reason: "session duration limit reached",
			refusal: &Refusal{Type: "invalid_request_error", Code: "session_expired", Message: "the gateway's session duration limit of " + s.limits.MaxSession.String() + " was reached"}})
	})
	defer expire.Stop()
	var idle *time.Timer
	idle = time.AfterFunc(s.limits.Idle, func() {
		// Activity is stamped per message, not by resetting the timer:
		// the timer re-arms itself for what is left of the idle time.
		left := time.Duration(s.lastActive.Load()+int64(s.limits.Idle)) - time.Duration(time.Now().UnixNano())
		if left > 0 {
			idle.Reset(left)
			return
		}
		s.end(ending{cause: CauseIdle, toClient: ClosePolicy, toUpstream: websocket.StatusNormalClosure, reason: "idle timeout",
			refusal: &Refusal{Type: "invalid_request_error", Code: "idle_timeout", Message: "no message for " + s.limits.Idle.String() + ": the gateway closed the session"}})
	})
	defer idle.Stop()
	stopCtx := context.AfterFunc(ctx, s.GoAway)
	defer stopCtx()

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.pumpIn(pumpCtx)
	}()
	s.pumpOut(pumpCtx)
	<-done
	<-s.ended
	// Both pumps read their side to its end, close answers included:
	// nothing is left to wait for.
	_ = s.client.CloseNow()
	_ = s.upstream.CloseNow()
	for id, c := range s.pending {
		c.Close(Done{ID: id, Status: "incomplete"})
	}
	e := s.ending
	t := Totals{
		MessagesIn: s.msgsIn.Load(), MessagesOut: s.msgsOut.Load(),
		BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load(),
		Responses: s.responses, Usage: s.usage,
		Cause: e.cause, Code: e.toClient, Reason: e.reason,
	}
	sessionsEnded.WithLabelValues(e.cause).Inc()
	return t
}

// GoAway ends the session as a server shutdown does: both sides get
// 1001.
func (s *Session) GoAway() {
	s.end(ending{cause: CauseShutdown, toClient: CloseGoingAway, toUpstream: CloseGoingAway, reason: "the gateway is shutting down"})
}

// end ends the session once, as e says: the refusal's error event to
// the client, the cancel upstream, then both closes. A close handshake
// runs on a goroutine of its own: its peer's answer is read by the
// pump still reading that side (the pumps end once both sides closed),
// and Run cuts what is left when they did.
func (s *Session) end(e ending) {
	s.endOnce.Do(func() {
		s.ending = e
		if e.refusal != nil || e.cancel != "" {
			ctx, cancel := context.WithTimeout(context.Background(), s.limits.WriteTimeout)
			if e.refusal != nil && e.toClient != closeNow {
				_ = s.client.Write(ctx, websocket.MessageText, ErrorEvent(e.refusal))
			}
			if e.cancel != "" && e.toUpstream != closeNow {
				_ = s.upstream.Write(ctx, websocket.MessageText, cancelEvent(e.cancel))
			}
			cancel()
		}
		for _, side := range [2]struct {
			c    *websocket.Conn
			code websocket.StatusCode
		}{{s.client, e.toClient}, {s.upstream, e.toUpstream}} {
			if side.code == closeNow {
				_ = side.c.CloseNow()
				continue
			}
			go func() { _ = side.c.Close(side.code, e.reason) }()
		}
		close(s.ended)
	})
}

// pumpIn relays client messages to the provider.
func (s *Session) pumpIn(ctx context.Context) {
	var buf []byte
	wd := s.watchdog(s.upstream, CauseSlowUpstream)
	defer wd.Stop()
	for {
		typ, msg, err := s.read(ctx, s.client, &buf)
		if err != nil {
			s.end(s.readEnd(err, true))
			return
		}
		wd.Reset(s.limits.WriteTimeout)
		err = s.upstream.Write(ctx, typ, msg)
		wd.Stop()
		if err != nil {
			s.end(ending{cause: CauseUpstreamFailed, toClient: CloseUpstream, toUpstream: closeNow, reason: "the provider connection failed"})
			return
		}
		s.msgsIn.Add(1)
		s.bytesIn.Add(int64(len(msg)))
		relayedBytes[dirIn].Add(float64(len(msg)))
		relayedMessages[dirIn].Inc()
		buf = shrink(buf)
	}
}

// pumpOut relays provider messages to the client, metering the
// responses they report.
func (s *Session) pumpOut(ctx context.Context) {
	var buf []byte
	wd := s.watchdog(s.client, CauseSlowClient)
	defer wd.Stop()
	for {
		typ, msg, err := s.read(ctx, s.upstream, &buf)
		if err != nil {
			s.end(s.readEnd(err, false))
			return
		}
		if typ == websocket.MessageText {
			if e, stop := s.inspect(msg); stop {
				s.end(e)
				return
			}
		}
		wd.Reset(s.limits.WriteTimeout)
		err = s.client.Write(ctx, typ, msg)
		wd.Stop()
		if err != nil {
			s.end(ending{cause: CauseClientGone, toClient: closeNow, toUpstream: websocket.StatusNormalClosure, reason: "the client went away"})
			return
		}
		s.msgsOut.Add(1)
		s.bytesOut.Add(int64(len(msg)))
		relayedBytes[dirOut].Add(float64(len(msg)))
		relayedMessages[dirOut].Inc()
		buf = shrink(buf)
	}
}

// watchdog returns the stopped timer that ends the session when a write
// to c blocks longer than the write timeout: c does not read, and the
// gateway holds no more than the one message it is writing.
func (s *Session) watchdog(c *websocket.Conn, cause string) *time.Timer {
	t := time.AfterFunc(time.Hour, func() {
		// The provider is mid-stream: a close handshake would read (and
		// drop) what it still sends for seconds, so both sides are cut.
		e := ending{cause: cause, toClient: closeNow, toUpstream: closeNow, reason: "the client does not read"}
		if c == s.upstream {
			e = ending{cause: cause, toClient: CloseUpstream, toUpstream: closeNow, reason: "the provider does not read"}
		}
		// The blocked write returns once its connection is closed.
		s.end(e)
	})
	t.Stop()
	return t
}

// read reads one message of c into *buf, which it reuses.
func (s *Session) read(ctx context.Context, c *websocket.Conn, buf *[]byte) (websocket.MessageType, []byte, error) {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*buf = b
			return 0, nil, err
		}
	}
	*buf = b
	s.lastActive.Store(time.Now().UnixNano())
	return typ, b, nil
}

// keepBuf is the largest read buffer a session keeps between messages:
// an idle session should not hold the memory of its largest audio chunk.
const keepBuf = 64 << 10

func shrink(b []byte) []byte {
	if cap(b) > keepBuf {
		return nil
	}
	return b[:0]
}

// readEnd is how the session ends when reading one side failed.
func (s *Session) readEnd(err error, fromClient bool) ending {
	code := websocket.CloseStatus(err)
	var ce websocket.CloseError
	reason := ""
	if errors.As(err, &ce) {
		reason = ce.Reason
	}
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig):
		// The library already closed that side with 1009.
		e := ending{cause: CauseTooBig, reason: "message larger than the gateway's limit"}
		if fromClient {
			e.toClient, e.toUpstream = closeNow, websocket.StatusNormalClosure
		} else {
			e.toClient, e.toUpstream = CloseTooBig, closeNow
		}
		return e
	case code >= 0 && fromClient:
		return ending{cause: CauseClientClosed, toClient: closeNow, toUpstream: passable(code), reason: reason}
	case code >= 0:
		return ending{cause: CauseUpstreamClosed, toClient: passable(code), toUpstream: closeNow, reason: reason}
	case fromClient:
		return ending{cause: CauseClientGone, toClient: closeNow, toUpstream: websocket.StatusNormalClosure, reason: "the client went away"}
	}
	return ending{cause: CauseUpstreamFailed, toClient: CloseUpstream, toUpstream: closeNow, reason: "the provider connection failed"}
}

// passable is a close code received from one side as it may be sent to
// the other: the codes that must not be sent (1005, 1006, 1015) become
// 1000.
func passable(code websocket.StatusCode) websocket.StatusCode {
	switch code {
	case websocket.StatusNoStatusRcvd, websocket.StatusAbnormalClosure, websocket.StatusTLSHandshake:
		return websocket.StatusNormalClosure
	}
	return code
}

// inspect meters a provider event on its way: response.created reserves
// the response, response.done settles it. stop reports that the session
// ends instead (a refusal, or a done event that cannot be read).
func (s *Session) inspect(msg []byte) (e ending, stop bool) {
	switch eventType(msg) {
	case "response.created":
		id := responseID(msg)
		if _, open := s.pending[id]; open {
			return ending{}, false
		}
		c, ref := s.meter.Open(id)
		if ref != nil {
			return ending{cause: CauseRefused, toClient: ClosePolicy, toUpstream: websocket.StatusNormalClosure,
				reason: ref.Code, refusal: ref, cancel: id}, true
		}
		if s.pending == nil {
			s.pending = make(map[string]Charge, 1)
		}
		s.pending[id] = c
	case "response.done":
		d, ok := ParseDone(msg)
		if !ok {
			return ending{cause: CauseInvalid, toClient: CloseUpstream, toUpstream: websocket.StatusNormalClosure,
				reason:  "invalid event from the provider",
				refusal: &Refusal{Type: "server_error", Code: "invalid_provider_event", Message: "the provider sent a response.done event the gateway cannot read (a repeated member); the session is closed"}}, true
		}
		c, open := s.pending[d.ID]
		if !open {
			// A response the gateway saw no response.created for is
			// reserved now, to be settled at once; it cannot be
			// refused any more (it is done), so a refusal bills nothing
			// and the next response.created ends the session.
			var ref *Refusal
			if c, ref = s.meter.Open(d.ID); ref != nil {
				c = nil
			}
		}
		delete(s.pending, d.ID)
		if c != nil {
			c.Close(d)
		}
		s.responses++
		if d.Usage != nil {
			s.usage.Add(d.Usage)
		}
	}
	return ending{}, false
}

// responseID reads response.id of a response.created event, as a copy
// (the reservation keeps it).
func responseID(msg []byte) string {
	resp, ok := jsonlimit.Member(msg, "response")
	if !ok {
		return ""
	}
	return strings.Clone(stringMember(resp, "id"))
}

// IsUpgrade reports whether r asks for a WebSocket on path: a GET with
// Connection: upgrade and Upgrade: websocket.
func IsUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && headerHas(r.Header, "Connection", "upgrade") && headerHas(r.Header, "Upgrade", "websocket")
}

func headerHas(h http.Header, name, token string) bool {
	for _, v := range h[http.CanonicalHeaderKey(name)] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
