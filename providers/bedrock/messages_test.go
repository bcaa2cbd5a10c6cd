package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// A Messages call to a Claude model goes to InvokeModel (or its stream)
// with the client's body less model and stream, Bedrock's
// anthropic_version, and the anthropic-beta header in the body.
func TestPrepareMessages(t *testing.T) {
	body := `{"model":"anthropic.claude-sonnet-4-5-20250929-v1:0","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}],"top_k":3}`
	for _, stream := range []bool{false, true} {
		c := &providers.Call{Op: providers.OpMessages, Method: http.MethodPost, Path: "/messages", Body: []byte(body), Stream: stream,
			Model: "anthropic.claude-sonnet-4-5-20250929-v1:0", Header: http.Header{"Anthropic-Beta": {"context-1m-2025-08-07, interleaved-thinking-2025-05-14"}}}
		u := providers.Upstream{Header: http.Header{}}
		s := keys()
		if err := testProvider().Prepare(c, &s, &u); err != nil {
			t.Fatal(err)
		}
		want := "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke"
		accept := "application/json"
		if stream {
			want += "-with-response-stream"
			accept = "application/vnd.amazon.eventstream"
		}
		b := u.Body
		if u.URL.String() != want || u.Header.Get("Accept") != accept || !strings.Contains(u.Header.Get("Authorization"), "AWS4-HMAC-SHA256") ||
			gjson.GetBytes(b, "model").Exists() || gjson.GetBytes(b, "stream").Exists() || gjson.GetBytes(b, "anthropic_version").String() != messagesVersion ||
			gjson.GetBytes(b, "anthropic_beta").Raw != `["context-1m-2025-08-07","interleaved-thinking-2025-05-14"]` || gjson.GetBytes(b, "top_k").Int() != 3 {
			t.Fatalf("stream=%v: %s %v %s", stream, u.URL, u.Header, b)
		}
	}
	c := &providers.Call{Op: providers.OpMessages, Body: []byte(`{"model":"amazon.nova-pro-v1:0"}`), Model: "amazon.nova-pro-v1:0", Header: http.Header{}}
	s := keys()
	if err := testProvider().Prepare(c, &s, &providers.Upstream{Header: http.Header{}}); err == nil {
		t.Fatal("a Messages call to a non-Claude model was sent")
	}
	if !testProvider().SpeaksMessages(providers.OpMessages, "us.anthropic.claude-3-7-sonnet-20250219-v1:0") || testProvider().SpeaksMessages(providers.OpMessages, "amazon.nova-pro-v1:0") ||
		testProvider().SpeaksMessages(providers.OpChat, "anthropic.claude-3-haiku") {
		t.Fatal("SpeaksMessages")
	}
}

// invokeFrames encodes Anthropic events as InvokeModelWithResponseStream
// chunk frames.
func invokeFrames(t testing.TB, events ...string) []byte {
	enc := eventstream.NewEncoder()
	var out bytes.Buffer
	for _, ev := range events {
		payload, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString([]byte(ev))})
		var m eventstream.Message
		m.Headers.Set(":event-type", eventstream.StringValue("chunk"))
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		m.Payload = payload
		if err := enc.Encode(&out, m); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func TestInvokeStream(t *testing.T) {
	frames := invokeFrames(t,
		`{"type":"message_start","message":{"id":"msg_b","type":"message","role":"assistant","content":[],"usage":{"input_tokens":12,"cache_read_input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`,
		`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":12}}`)
	for _, step := range []int{len(frames), 5} {
		var out bytes.Buffer
		s := messagesTranslator{}.Stream(nil, &out)
		for in := frames; len(in) > 0; {
			k := min(step, len(in))
			if _, err := s.Write(in[:k]); err != nil {
				t.Fatal(err)
			}
			in = in[k:]
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if !strings.HasPrefix(got, "event: message_start\ndata: {\"type\":\"message_start\"") || !strings.Contains(got, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n") ||
			!strings.HasSuffix(got, "event: message_stop\ndata: {\"type\":\"message_stop\",\"amazon-bedrock-invocationMetrics\":{\"inputTokenCount\":12}}\n\n") {
			t.Fatalf("step %d: %s", step, got)
		}
		if u := s.Usage(); u == nil || u.PromptTokens != 15 || u.CachedTokens != 3 || u.CompletionTokens != 4 {
			t.Fatalf("usage %+v", u)
		}
	}
	// An exception frame ends the stream with Anthropic's error event.
	var exc bytes.Buffer
	var m eventstream.Message
	m.Headers.Set(":message-type", eventstream.StringValue("exception"))
	m.Headers.Set(":exception-type", eventstream.StringValue("throttlingException"))
	m.Payload = []byte(`{"message":"Too many requests"}`)
	_ = eventstream.NewEncoder().Encode(&exc, m)
	var out bytes.Buffer
	s := messagesTranslator{}.Stream(nil, &out)
	_, _ = s.Write(append(invokeFrames(t, `{"type":"message_start","message":{"usage":{"input_tokens":1}}}`), exc.Bytes()...))
	if err := s.Close(); err == nil || !strings.HasSuffix(out.String(), `event: error`+"\n"+`data: {"type":"error","error":{"type":"rate_limit_error","message":"Too many requests"}}`+"\n\n") {
		t.Fatalf("%v %q", err, out.String())
	}
	// A chunk that is not one JSON object cannot inject events; a
	// pretty-printed one is compacted onto one data line.
	out.Reset()
	s = messagesTranslator{}.Stream(nil, &out)
	_, _ = s.Write(invokeFrames(t, "{\n\"type\": \"message_start\",\n\"message\":{}}", "{}\n\nevent: message_stop\ndata: {}"))
	_ = s.Close()
	if got := out.String(); !strings.HasPrefix(got, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n") || !strings.Contains(got, "event: error") || strings.Contains(got, "message_stop") {
		t.Fatalf("%q", got)
	}
}

// FuzzInvokeStream: whatever bytes arrive, the converter neither panics
// nor hangs, and Close returns.
func FuzzInvokeStream(f *testing.F) {
	f.Add(invokeFrames(f, `{"type":"message_start","message":{"usage":{"input_tokens":1}}}`, `{"type":"message_stop"}`), uint8(3))
	f.Add(invokeFrames(f, "not json\n\nevent: x"), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		s := messagesTranslator{}.Stream(nil, &bytes.Buffer{})
		n := int(split%64) + 1
		for len(in) > 0 {
			k := min(n, len(in))
			if _, err := s.Write(in[:k]); err != nil {
				break
			}
			in = in[k:]
		}
		_ = s.Close()
		_ = s.Usage()
	})
}
