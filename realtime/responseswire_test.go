package realtime

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseCreate(t *testing.T) {
	cases := []struct {
		name, msg, body, streamID, code, param string
	}{
		{name: "plain", msg: `{"type":"response.create","model":"m","input":"hi"}`, body: `{"model":"m","input":"hi","stream":true}`},
		{name: "ws members dropped", msg: `{"type":"response.create","stream_id":"a.b-1","stream":false,"generate":true,"background":false,"model":"m"}`,
			body: `{"model":"m","stream":true}`, streamID: "a.b-1"},
		{name: "escaped names compared decoded", msg: `{"\u0074ype":"response.create","model":"m"}`, body: `{"model":"m","stream":true}`},
		{name: "duplicate member", msg: `{"type":"response.create","model":"a","model":"b"}`, code: "invalid_message"},
		{name: "escaped duplicate", msg: `{"type":"response.create","model":"a","\u006dodel":"b"}`, code: "invalid_message"},
		{name: "not an object", msg: `[1]`, code: "invalid_message"},
		{name: "other type", msg: `{"type":"session.update"}`, code: "invalid_message", param: "type"},
		{name: "steer", msg: `{"type":"response.steer"}`, code: "unsupported_event"},
		{name: "bad stream id", msg: `{"type":"response.create","stream_id":"a b"}`, code: "invalid_message", param: "stream_id"},
		{name: "stream id not a string", msg: `{"type":"response.create","stream_id":1}`, code: "invalid_message", param: "stream_id"},
		{name: "background", msg: `{"type":"response.create","background":true}`, code: "invalid_message", param: "background"},
		{name: "generate false", msg: `{"type":"response.create","generate":false}`, code: "invalid_message", param: "generate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ref := ParseCreate([]byte(c.msg))
			if c.code != "" {
				if ref == nil || ref.Code != c.code || ref.Param != c.param || ref.Status != 400 {
					t.Fatalf("refusal %+v, want %s (param %q)", ref, c.code, c.param)
				}
				return
			}
			if ref != nil || string(got.Body) != c.body || got.StreamID != c.streamID {
				t.Fatalf("got %s %q %+v, want %s %q", got.Body, got.StreamID, ref, c.body, c.streamID)
			}
		})
	}
}

func TestWithStreamID(t *testing.T) {
	cases := []struct{ ev, id, want string }{
		{`{"type":"x"}`, "", `{"type":"x"}`},
		{`{"type":"x"}`, "l1", `{"stream_id":"l1","type":"x"}`},
		{`{}`, "l1", `{"stream_id":"l1"}`},
		{` {"a":1} `, "l1", `{"stream_id":"l1","a":1}`},
	}
	for _, c := range cases {
		if got := string(withStreamID([]byte(c.ev), c.id)); got != c.want {
			t.Errorf("withStreamID(%s, %q) = %s, want %s", c.ev, c.id, got, c.want)
		}
	}
}

func TestResponsesErrorEvent(t *testing.T) {
	ev := ResponsesErrorEvent(&Refusal{Type: "invalid_request_error", Code: "budget_exceeded", Message: "spent", Status: 412}, "l1")
	if gjson.GetBytes(ev, "type").Str != "error" || gjson.GetBytes(ev, "status").Int() != 412 || gjson.GetBytes(ev, "error.code").Str != "budget_exceeded" ||
		gjson.GetBytes(ev, "error.param").Type != gjson.Null || gjson.GetBytes(ev, "stream_id").Str != "l1" {
		t.Errorf("error event %s", ev)
	}
	for status, ends := range map[int]bool{412: true, 429: true, 400: false, 502: false} {
		if (&Refusal{Status: status}).EndsSession() != ends {
			t.Errorf("status %d: EndsSession %v", status, !ends)
		}
	}
}
