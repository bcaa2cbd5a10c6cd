package realtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Responder runs one response.create through the gateway's Responses
// pipeline (the handlers back it with the same road as POST
// /v1/responses with stream: true).
type Responder interface {
	// Respond runs c, sending each event of its stream with send, in
	// order. When the gateway answered with an error rather than a
	// stream it returns it, to go to the client as an error event. A
	// send that fails means the client is gone or does not read; the
	// response should then end as it does for an HTTP client gone.
	Respond(ctx context.Context, c Create, send func(event []byte) error) *Refusal
}

// ResponsesSession runs one socket of the Responses API's WebSocket
// mode: it reads a response.create, has the Responder run it to its end
// (events written as they come), and only then reads the next, so
// responses on a socket are sequential, as OpenAI's are, and a client
// sending faster than its responses complete is held back by TCP.
type ResponsesSession struct {
	conn   *websocket.Conn
	limits Limits
	run    Responder

	lastActive atomic.Int64
	bytesIn    atomic.Int64
	bytesOut   atomic.Int64
	msgsIn     atomic.Int64
	msgsOut    atomic.Int64
	responses  atomic.Int64

	// stop cancels the response running when the session ends.
	stop    context.CancelFunc
	endOnce sync.Once
	ending  ending
	ended   chan struct{}
}

// NewResponsesSession runs conn under limits (filled with their
// defaults), each response through run.
func NewResponsesSession(conn *websocket.Conn, limits Limits, run Responder) *ResponsesSession {
	s := &ResponsesSession{conn: conn, limits: limits.Fill(), run: run, ended: make(chan struct{})}
	s.conn.SetReadLimit(s.limits.MaxMessage)
	return s
}

// Run serves the socket until the client closes it or a bound ends it,
// and returns its totals. ctx ending ends it as a shutdown does.
func (s *ResponsesSession) Run(ctx context.Context) Totals {
	openSessions.Inc()
	defer openSessions.Dec()
	s.stamp()
	// The reads' context ends only after the session did: the library
	// closes a connection whose read context ends, and the session must
	// send its error event and close code first.
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	s.stop = stop
	expire := time.AfterFunc(s.limits.MaxSession, func() {
		s.end(ending{cause: CauseExpired, toClient: ClosePolicy, reason: "session duration limit reached",
			refusal: &Refusal{Type: "invalid_request_error", Code: "session_expired", Message: "the gateway's session duration limit of " + s.limits.MaxSession.String() + " was reached"}})
	})
	defer expire.Stop()
	var idle *time.Timer
	idle = time.AfterFunc(s.limits.Idle, func() {
		left := time.Duration(s.lastActive.Load()+int64(s.limits.Idle)) - time.Duration(time.Now().UnixNano())
		if left > 0 {
			idle.Reset(left)
			return
		}
		s.end(ending{cause: CauseIdle, toClient: ClosePolicy, reason: "idle timeout",
			refusal: &Refusal{Type: "invalid_request_error", Code: "idle_timeout", Message: "no message for " + s.limits.Idle.String() + ": the gateway closed the session"}})
	})
	defer idle.Stop()
	stopCtx := context.AfterFunc(ctx, s.GoAway)
	defer stopCtx()

	s.serve(rctx)
	_ = s.conn.CloseNow()
	e := s.ending
	t := Totals{
		MessagesIn: s.msgsIn.Load(), MessagesOut: s.msgsOut.Load(),
		BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load(),
		Responses: s.responses.Load(),
		Cause:     e.cause, Code: e.toClient, Reason: e.reason,
	}
	sessionsEnded.WithLabelValues(e.cause).Inc()
	return t
}

// serve reads and answers messages, one at a time, until the session
// ends.
func (s *ResponsesSession) serve(ctx context.Context) {
	for {
		typ, msg, err := s.conn.Read(ctx)
		if err != nil {
			s.endRead(err)
			return
		}
		s.stamp()
		s.msgsIn.Add(1)
		s.bytesIn.Add(int64(len(msg)))
		relayedMessages[dirIn].Inc()
		relayedBytes[dirIn].Add(float64(len(msg)))
		if typ != websocket.MessageText {
			s.sendError(invalidMessage("", "messages are JSON text; a binary message was sent"), "")
			continue
		}
		c, ref := ParseCreate(msg)
		if ref == nil {
			s.responses.Add(1)
			ref = s.run.Respond(ctx, c, func(ev []byte) error { return s.send(withStreamID(ev, c.StreamID)) })
		}
		if s.isEnded() {
			return
		}
		if ref == nil {
			continue
		}
		if ref.EndsSession() {
			s.end(ending{cause: CauseRefused, toClient: ClosePolicy, reason: ref.Code, refusal: ref, streamID: c.StreamID})
			return
		}
		s.sendError(ref, c.StreamID)
	}
}

// endRead ends the session on a read's error: the client's close (the
// library answered it), a message over the bound (the library closed
// the socket with 1009), or the client gone.
func (s *ResponsesSession) endRead(err error) {
	var ce websocket.CloseError
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig):
		s.end(ending{cause: CauseTooBig, toClient: closeNow, reason: "message larger than the gateway's limit"})
	case errors.As(err, &ce):
		s.end(ending{cause: CauseClientClosed, toClient: closeNow, reason: ce.Reason})
	default:
		s.end(ending{cause: CauseClientGone, toClient: closeNow, reason: "the client went away"})
	}
}

// send writes one event to the client, bounded by the write timeout: a
// client that does not read ends the session rather than hold a
// response's events in memory.
func (s *ResponsesSession) send(ev []byte) error {
	if s.isEnded() {
		return errEnded
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.limits.WriteTimeout)
	err := s.conn.Write(ctx, websocket.MessageText, ev)
	cancel()
	if err != nil {
		cause := CauseClientGone
		if errors.Is(err, context.DeadlineExceeded) {
			cause = CauseSlowClient
		}
		s.end(ending{cause: cause, toClient: closeNow})
		return err
	}
	s.stamp()
	s.msgsOut.Add(1)
	s.bytesOut.Add(int64(len(ev)))
	relayedMessages[dirOut].Inc()
	relayedBytes[dirOut].Add(float64(len(ev)))
	return nil
}

// sendError sends r as an error event; the session goes on.
func (s *ResponsesSession) sendError(r *Refusal, streamID string) {
	_ = s.send(ResponsesErrorEvent(r, streamID))
}

// errEnded is send's error once the session ended.
var errEnded = errors.New("the session ended")

// GoAway ends the session as a server shutdown does: the client gets
// 1001, and the response running is cancelled.
func (s *ResponsesSession) GoAway() {
	s.end(ending{cause: CauseShutdown, toClient: CloseGoingAway, reason: "the gateway is shutting down"})
}

func (s *ResponsesSession) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// end ends the session once, as e says: its error event, then the
// close. The running response's context ends with it.
func (s *ResponsesSession) end(e ending) {
	s.endOnce.Do(func() {
		s.ending = e
		close(s.ended)
		if e.refusal != nil && e.toClient != closeNow {
			ctx, cancel := context.WithTimeout(context.Background(), s.limits.WriteTimeout)
			_ = s.conn.Write(ctx, websocket.MessageText, ResponsesErrorEvent(e.refusal, e.streamID))
			cancel()
		}
		if e.toClient != closeNow {
			_ = s.conn.Close(e.toClient, e.reason)
		}
		if s.stop != nil {
			s.stop()
		}
	})
}

func (s *ResponsesSession) stamp() { s.lastActive.Store(time.Now().UnixNano()) }
