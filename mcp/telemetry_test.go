package mcp

import (
	"slices"
	"testing"
)

func TestErrorType(t *testing.T) {
	for _, c := range []struct {
		status string
		code   int64
		want   string
	}{
		{statusOK, 0, ""},
		{statusToolError, 0, "tool_error"},
		{statusError, -32602, "-32602"},
		{statusUnavailable, codeUnavailable, "unavailable"},
		{statusCancelled, 0, "cancelled"},
		{statusDenied, codeInvalidParams, "denied"},
		{statusRejected, 0, "rejected"},
	} {
		if got := errorType(c.status, c.code); got != c.want {
			t.Errorf("errorType(%q, %d) = %q, want %q", c.status, c.code, got, c.want)
		}
	}
	var nilRec *callRecord
	if nilRec.errorType() != "" {
		t.Error("a nil record has an error type")
	}
}

// TestLabelValues: the tool or prompt label is the upstream name the
// server listed, never the caller's exposed name (a denied call has
// none).
func TestLabelValues(t *testing.T) {
	for _, c := range []struct {
		rec  *callRecord
		want []string
	}{
		{&callRecord{Method: methodCallTool, Name: "s__t", Server: "s", Upstream: "t"}, []string{methodCallTool, "s", "t", "", ""}},
		{&callRecord{Method: methodGetPrompt, Name: "s__p", Server: "s", Upstream: "p"}, []string{methodGetPrompt, "s", "", "p", ""}},
		{&callRecord{Method: methodCallTool, Name: "anything-the-caller-sent"}, []string{methodCallTool, "", "", "", "denied"}},
	} {
		et := ""
		if c.rec.Upstream == "" {
			et = "denied"
		}
		if got := c.rec.labelValues(et); !slices.Equal(got, c.want) {
			t.Errorf("labelValues(%+v) = %q, want %q", c.rec, got, c.want)
		}
	}
}
