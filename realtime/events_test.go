package realtime

import (
	"encoding/json"
	"testing"
)

func TestErrorEvent(t *testing.T) {
	a := ErrorEvent(&Refusal{Type: "insufficient_quota", Code: "budget_exceeded", Message: `spent "all"`})
	b := ErrorEvent(&Refusal{Type: "x", Code: "y", Message: "z"})
	var ev struct {
		Type    string `json:"type"`
		EventID string `json:"event_id"`
		Error   struct {
			Type, Code, Message string
			Param, EventID      *string
		} `json:"error"`
	}
	if err := json.Unmarshal(a, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "error" || ev.EventID == "" || ev.Error.Code != "budget_exceeded" || ev.Error.Type != "insufficient_quota" || ev.Error.Message != `spent "all"` {
		t.Errorf("%s", a)
	}
	var other struct {
		EventID string `json:"event_id"`
	}
	_ = json.Unmarshal(b, &other)
	if other.EventID == ev.EventID {
		t.Error("two events with one id")
	}
	if string(cancelEvent("resp_1")) != `{"type":"response.cancel","response_id":"resp_1"}` {
		t.Errorf("%s", cancelEvent("resp_1"))
	}
}
