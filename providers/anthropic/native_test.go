package anthropic

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

// A Messages call goes to /v1/messages (or count_tokens) with the
// client's body as it is, the provider key in x-api-key and the client's
// anthropic-version and anthropic-beta.
func TestPrepareMessages(t *testing.T) {
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"top_k":3}`)
	for _, tc := range []struct {
		op   providers.Operation
		path string
	}{{providers.OpMessages, "/messages"}, {providers.OpCountTokens, "/messages/count_tokens"}} {
		c := &providers.Call{Op: tc.op, Method: http.MethodPost, Path: tc.path, Body: body, Model: "claude-sonnet-4-5",
			Header: http.Header{"Anthropic-Version": {"2026-01-01"}, "Anthropic-Beta": {"a,b"}}}
		u := providers.Upstream{Header: http.Header{}}
		if err := (provider{}).Prepare(c, &providers.Settings{APIKey: "sk-ant"}, &u); err != nil {
			t.Fatal(err)
		}
		if u.URL.String() != "https://api.anthropic.com/v1"+tc.path || !bytes.Equal(u.Body, body) || u.Method != http.MethodPost ||
			u.Header.Get("x-api-key") != "sk-ant" || u.Header.Get("anthropic-version") != "2026-01-01" || u.Header.Get("anthropic-beta") != "a,b" {
			t.Fatalf("%s: %s %s %v", tc.op, u.URL, u.Body, u.Header)
		}
	}
}

func TestNativeTranslator(t *testing.T) {
	n := Native{Provider: Slug}
	body := goldentest.Read(t, "testdata/response_tools.json")
	out, u, err := n.Response(nil, body)
	if err != nil || !bytes.Equal(out, body) {
		t.Fatalf("%v %s", err, out)
	}
	if u.PromptTokens != 1320 || u.CachedTokens != 1000 || u.CacheWriteTokens != 20 || u.CompletionTokens != 90 {
		t.Fatalf("usage %+v", u)
	}
	if _, _, err := n.Response(nil, []byte(`{"type":"error"}`)); err == nil {
		t.Fatal("a body without a message was taken")
	}
	if got := string(n.Error(nil, 404, []byte(`{"error":{"code":404,"message":"Publisher model not found","status":"NOT_FOUND"}}`))); got != `{"type":"error","error":{"type":"not_found_error","message":"Publisher model not found"}}` {
		t.Fatal(got)
	}
}

// The stream passes through byte for byte, its usage read from
// message_start and message_delta; a stream without message_stop ends
// with an error event.
func TestNativeStream(t *testing.T) {
	tr := goldentest.Read(t, "testdata/stream_tools.sse")
	for _, step := range []int{len(tr), 1, 13} {
		var out bytes.Buffer
		s := NewNativeStream(&out)
		for in := tr; len(in) > 0; {
			k := min(step, len(in))
			if _, err := s.Write(in[:k]); err != nil {
				t.Fatal(err)
			}
			in = in[k:]
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), tr) {
			t.Fatalf("step %d: the stream changed", step)
		}
		if u := s.Usage(); u == nil || u.CachedTokens != 100 || u.PromptTokens < 572 {
			t.Fatalf("usage %+v", u)
		}
	}
	var out bytes.Buffer
	s := NewNativeStream(&out)
	_, _ = s.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n"))
	if err := s.Close(); err == nil || !strings.HasSuffix(out.String(), "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"the provider's stream ended before it completed\"}}\n\n") {
		t.Fatalf("%v %q", err, out.String())
	}
}

// A stream cut in the middle of an event reaches the client up to its
// last whole event, then the error event on its own, however the
// provider's reads split it; a last event without its blank line is
// passed as it came when it ends the stream, and with the blank line
// added before the error event when it does not. message_start's usage
// is not final; message_delta's is.
func TestNativeStreamCutMidEvent(t *testing.T) {
	whole := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
	errEvent := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"the provider's stream ended before it completed\"}}\n\n"
	stop := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}"
	for _, tc := range []struct {
		name, in, want string
		final          bool
	}{
		{"half an event", whole + "event: content_block_delta\ndata: {\"type\":\"content_blo", whole + errEvent, false},
		{"half a line ending", whole + "event: content_block_delta\r", whole + errEvent, false},
		{"a whole last event without its blank line", whole + `data: {"type":"ping"}`, whole + "data: {\"type\":\"ping\"}\n\n" + errEvent, false},
		{"message_stop without its blank line", whole + stop, whole + stop, true},
	} {
		for _, step := range []int{1, 7, 64, len(tc.in)} {
			var out bytes.Buffer
			s := NewNativeStream(&out)
			for in := []byte(tc.in); len(in) > 0; {
				k := min(step, len(in))
				if _, err := s.Write(in[:k]); err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(out.String(), "\n\n") && out.Len() > 0 {
					t.Fatalf("%s, step %d: the client was sent part of an event: %q", tc.name, step, out.String())
				}
				in = in[k:]
			}
			err := s.Close()
			if out.String() != tc.want || (err == nil) != tc.final || s.UsageFinal() != tc.final {
				t.Fatalf("%s, step %d: %v, final %v:\n%q\nwant\n%q", tc.name, step, err, s.UsageFinal(), out.String(), tc.want)
			}
		}
	}
}

// FuzzNativeStream: whatever the provider streams, the pass-through
// neither panics nor hangs, and Close returns.
func FuzzNativeStream(f *testing.F) {
	for _, name := range []string{"stream_tools", "stream_error", "stream_truncated"} {
		f.Add(goldentest.Read(f, "testdata/"+name+".sse"), uint8(7))
	}
	f.Add([]byte("event: message_delta\ndata: {\"usage\":[[[[1]]]]}\n\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		var out bytes.Buffer
		s := NewNativeStream(&out)
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
