package guardrails_test

import (
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

func TestInputText(t *testing.T) {
	b := guardrails.BeforeRequest
	a := guardrails.AfterRequest
	tests := []struct {
		name  string
		in    guardrails.Input
		want  string
		parts int
	}{
		{"chat last message string", guardrails.Input{Stage: b, RequestType: "chatComplete",
			Request: []byte(`{"messages":[{"role":"user","content":"first"},{"role":"user","content":"last"}]}`)}, "last", 1},
		{"chat parts joined", guardrails.Input{Stage: b, RequestType: "stream-chatComplete",
			Request: []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":""},{"type":"text","text":"b"}]}]}`)}, "a\nb", 3},
		{"completion prompt", guardrails.Input{Stage: b, RequestType: "complete", Request: []byte(`{"prompt":"p"}`)}, "p", 1},
		{"completion prompt array", guardrails.Input{Stage: b, RequestType: "complete", Request: []byte(`{"prompt":["p1","p2"]}`)}, "p1\np2", 2},
		{"embedding input", guardrails.Input{Stage: b, RequestType: "embed", Request: []byte(`{"input":"e"}`)}, "e", 1},
		{"responses string input", guardrails.Input{Stage: b, RequestType: "createModelResponse", Request: []byte(`{"input":"r"}`)}, "r", 1},
		{"responses items", guardrails.Input{Stage: b, RequestType: "createModelResponse",
			Request: []byte(`{"input":[{"role":"user","content":"x"},{"role":"user","content":[{"type":"input_text","text":"y"}]}]}`)}, "y", 1},
		{"no messages", guardrails.Input{Stage: b, RequestType: "chatComplete", Request: []byte(`{}`)}, "", 0},
		{"chat answer", guardrails.Input{Stage: a, RequestType: "chatComplete",
			Response: []byte(`{"choices":[{"message":{"content":"c0"}},{"message":{"content":"c1"}}]}`)}, "c0", 1},
		{"completion answer", guardrails.Input{Stage: a, RequestType: "complete", Response: []byte(`{"choices":[{"text":"t"}]}`)}, "t", 1},
		{"messages answer", guardrails.Input{Stage: a, RequestType: "messages",
			Response: []byte(`{"content":[{"type":"text","text":"m1"},{"type":"tool_use"},{"type":"text","text":"m2"}]}`)}, "m1\nm2", 2},
		{"responses answer", guardrails.Input{Stage: a, RequestType: "createModelResponse",
			Response: []byte(`{"output":[{"type":"message","content":[{"type":"output_text","text":"o"}]}]}`)}, "o", 1},
		{"stream answer", guardrails.Input{Stage: a, RequestType: "stream-chatComplete", ResponseText: "s"}, "s", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.Text(); got != tc.want {
				t.Fatalf("Text() = %q, want %q", got, tc.want)
			}
			if got := len(guardrails.TextParts(&tc.in)); got != tc.parts {
				t.Fatalf("%d parts, want %d", got, tc.parts)
			}
		})
	}
}

func TestRequestType(t *testing.T) {
	tests := []struct {
		op     string
		stream bool
		want   string
	}{
		{"chat.completions", false, "chatComplete"},
		{"chat.completions", true, "stream-chatComplete"},
		{"completions", false, "complete"},
		{"embeddings", false, "embed"},
		{"responses", true, "stream-createModelResponse"},
		{"proxy", false, "proxy"},
	}
	for _, tc := range tests {
		if got := guardrails.RequestType(tc.op, tc.stream); got != tc.want {
			t.Errorf("RequestType(%q, %v) = %q, want %q", tc.op, tc.stream, got, tc.want)
		}
	}
}

// A translated call is read in the shape of what its target was sent and
// answered (Format), not in the client's: a Messages or Responses call
// sent to a chat target has chat bodies.
func TestTextTranslatedFormat(t *testing.T) {
	chatReq := []byte(`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"the question"}]}`)
	chatAns := []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"the answer"}}]}`)
	for _, typ := range []string{"messages", "createModelResponse", "stream-messages"} {
		before := &guardrails.Input{Stage: guardrails.BeforeRequest, RequestType: typ, Format: "chatComplete", Request: chatReq}
		after := &guardrails.Input{Stage: guardrails.AfterRequest, RequestType: typ, Format: "chatComplete", Request: chatReq, Response: chatAns}
		if before.Text() != "the question" || after.Text() != "the answer" {
			t.Errorf("%s translated: read %q and %q", typ, before.Text(), after.Text())
		}
		if before.BaseType() != strings.TrimPrefix(typ, "stream-") {
			t.Errorf("%s: the call's type became %q", typ, before.BaseType())
		}
	}
	native := &guardrails.Input{Stage: guardrails.AfterRequest, RequestType: "messages", Response: []byte(`{"content":[{"type":"text","text":"native"}]}`)}
	if native.Text() != "native" {
		t.Errorf("native messages answer read as %q", native.Text())
	}
}
