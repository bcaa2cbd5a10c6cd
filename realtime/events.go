package realtime

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Close codes the gateway ends a session with (docs/realtime.md). A
// close the client or the provider started is passed on with its own
// code.
const (
	// CloseGoingAway ends sessions when the server shuts down, or a
	// replaced configuration's close delay ran out.
	CloseGoingAway = websocket.StatusGoingAway
	// ClosePolicy ends a session refused by a limit (a spent budget, a
	// rate limit) or past a bound (session duration, idle time); an
	// error event saying which precedes it.
	ClosePolicy = websocket.StatusPolicyViolation
	// CloseTooBig ends a session in which a message exceeded the size
	// bound.
	CloseTooBig = websocket.StatusMessageTooBig
	// CloseUpstream ends a session whose provider connection failed.
	CloseUpstream = websocket.StatusInternalError
)

// Refusal is why the gateway ends a session itself: sent to the client
// as a Realtime error event before the close.
type Refusal struct {
	// Type and Code classify it as OpenAI's error events do
	// (invalid_request_error, rate_limit_exceeded, budget_exceeded …).
	Type, Code string
	// Message says what happened, for a person.
	Message string
	// Param names the member a Responses WebSocket message got wrong,
	// "" when none (ResponsesErrorEvent).
	Param string
	// Status is the HTTP status the same refusal has on an HTTP call
	// (429, 412), for the log.
	Status int
}

// Error implements error.
func (r *Refusal) Error() string { return r.Message }

// eventSeq numbers the events the gateway makes itself.
var eventSeq atomic.Uint64

// ErrorEvent is r as a Realtime error event:
//
//	{"type":"error","event_id":"event_gw_…","error":{"type":…,"code":…,"message":…,"param":null,"event_id":null}}
func ErrorEvent(r *Refusal) []byte {
	type errBody struct {
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
		EventID *string `json:"event_id"`
	}
	b, _ := json.Marshal(struct {
		Type    string  `json:"type"`
		EventID string  `json:"event_id"`
		Error   errBody `json:"error"`
	}{"error", "event_gw_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_" + strconv.FormatUint(eventSeq.Add(1), 36),
		errBody{Type: r.Type, Code: r.Code, Message: r.Message}})
	return b
}

// cancelEvent is the client event that cancels response id upstream.
func cancelEvent(id string) []byte {
	b, _ := json.Marshal(struct {
		Type       string `json:"type"`
		ResponseID string `json:"response_id,omitempty"`
	}{"response.cancel", id})
	return b
}
