package realtime

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// The Responses API's WebSocket mode (docs/realtime.md): a client opens a
// WebSocket on /v1/responses and sends response.create messages, each the
// body of a POST /v1/responses with "type":"response.create" (and, for
// the SDKs' lanes, a stream_id); the server answers each with the events
// of its stream, one message per event, and takes the next only after.
// This file is that wire; ResponsesSession runs the socket.

// Client message types of the Responses WebSocket mode.
const (
	typeResponseCreate = "response.create"
	typeResponseSteer  = "response.steer"
)

// maxStreamID is the longest stream_id the SDKs send (1–256 of
// [A-Za-z0-9_.-]).
const maxStreamID = 256

// Create is one response.create message, as the HTTP form carries it.
type Create struct {
	// Body is the POST /v1/responses body: the message's members but
	// the WebSocket-only ones (type, stream_id), with "stream": true.
	Body []byte
	// StreamID is the message's stream_id, "" when it had none: every
	// event of the response carries it back.
	StreamID string
}

// wsOnly are the members of a response.create the HTTP body does not
// carry: the gateway sets stream itself, and generate is refused unless
// true (ParseCreate).
var wsOnly = []string{"type", "stream_id", "stream", "generate", "background"}

// ParseCreate reads a client message. A message that is not a
// well-formed response.create is a Refusal (status 400) the session
// answers with an error event and survives. It is read strictly, as
// request bodies are: a repeated member (names compared after
// unescaping) is refused rather than read one way or another.
func ParseCreate(msg []byte) (Create, *Refusal) {
	if err := jsonlimit.Object(msg); err != nil {
		return Create{}, invalidMessage("", "the message is not a JSON object the gateway accepts: "+err.Error())
	}
	vals := make([][]byte, len(wsOnly))
	jsonlimit.Members(msg, wsOnly, vals)
	typ, _ := jsonlimit.String(vals[0])
	var c Create
	if vals[1] != nil {
		id, ok := jsonlimit.String(vals[1])
		if !ok || !validStreamID(id) {
			return Create{}, invalidMessage("stream_id", "stream_id must be 1–256 ASCII letters, digits, underscores, hyphens or periods")
		}
		c.StreamID = id
	}
	switch {
	case typ == typeResponseSteer:
		return c, &Refusal{Type: "invalid_request_error", Code: "unsupported_event", Status: http.StatusBadRequest,
			Message: "response.steer is not supported by the gateway; send response.create"}
	case typ != typeResponseCreate:
		return c, invalidMessage("type", "the message's type must be response.create")
	case vals[4] != nil && string(vals[4]) != "false":
		return c, invalidMessage("background", "background responses are not supported over a WebSocket")
	case vals[3] != nil && string(vals[3]) != "true":
		return c, invalidMessage("generate", "generate: false is not supported by the gateway")
	}
	// The message is a checked object: its members are copied raw, but
	// the WebSocket-only ones, compared by their decoded names.
	body := make([]byte, 0, len(msg)+16)
	body = append(body, '{')
	gjson.ParseBytes(msg).ForEach(func(k, v gjson.Result) bool {
		for _, n := range wsOnly {
			if k.String() == n {
				return true
			}
		}
		body = append(body, k.Raw...)
		body = append(body, ':')
		body = append(body, v.Raw...)
		body = append(body, ',')
		return true
	})
	c.Body = append(body, `"stream":true}`...)
	return c, nil
}

func invalidMessage(param, msg string) *Refusal {
	return &Refusal{Type: "invalid_request_error", Code: "invalid_message", Param: param, Message: msg, Status: http.StatusBadRequest}
}

func validStreamID(id string) bool {
	if id == "" || len(id) > maxStreamID {
		return false
	}
	for i := range len(id) {
		ch := id[i]
		if !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.') {
			return false
		}
	}
	return true
}

// withStreamID returns event (a JSON object the gateway wrote) with
// "stream_id" first when id is set, so the SDKs' lanes route it.
func withStreamID(event []byte, id string) []byte {
	if id == "" {
		return event
	}
	event = bytes.TrimSpace(event)
	if len(event) < 2 || event[0] != '{' {
		return event
	}
	out := make([]byte, 0, len(event)+len(id)+16)
	out = append(out, `{"stream_id":`...)
	out = appendJSONString(out, id)
	rest := bytes.TrimSpace(event[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// appendJSONString appends s as a JSON string (ids are checked ASCII).
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// ResponsesErrorEvent is r as the Responses WebSocket mode's error
// event, with the HTTP status the same answer has on POST /v1/responses:
//
//	{"type":"error","status":412,"error":{"type":…,"code":…,"message":…,"param":…},"stream_id":…}
func ResponsesErrorEvent(r *Refusal, streamID string) []byte {
	type errBody struct {
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	}
	e := errBody{Type: r.Type, Code: r.Code, Message: r.Message}
	if r.Param != "" {
		e.Param = &r.Param
	}
	b, _ := json.Marshal(struct {
		Type     string  `json:"type"`
		Status   int     `json:"status,omitempty"`
		Error    errBody `json:"error"`
		StreamID string  `json:"stream_id,omitempty"`
	}{"error", r.Status, e, streamID})
	return b
}

// EndsSession reports whether r, the answer to a response.create, ends
// the session: a limit's refusal (a spent budget, 412; a rate limit,
// 429), as it does a Realtime session, and a key no longer valid (401:
// revoked, expired or rotated out since the upgrade). Other errors (a bad request, a
// provider's failure) leave the socket open for the next response.
func (r *Refusal) EndsSession() bool {
	return r.Status == http.StatusPreconditionFailed || r.Status == http.StatusTooManyRequests ||
		r.Status == http.StatusUnauthorized
}
