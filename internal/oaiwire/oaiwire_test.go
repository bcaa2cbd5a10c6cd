package oaiwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

type event struct{ name, data string }

func decodeAll(t *testing.T, in string, split int) []event {
	t.Helper()
	var d Decoder
	var out []event
	h := func(name, data []byte) bool {
		out = append(out, event{string(name), string(data)})
		return true
	}
	b := []byte(in)
	for len(b) > 0 {
		n := min(split, len(b))
		if err := d.Feed(b[:n], h); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	d.End(h)
	return out
}

func TestDecoder(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []event
	}{
		{"data only", "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n", []event{{"", `{"a":1}`}, {"", `{"b":2}`}}},
		{"named and crlf", "event: ping\r\ndata: {}\r\n\r\n", []event{{"ping", "{}"}}},
		{"multi-line data and comment", ": keep-alive\ndata: a\ndata: b\n\n", []event{{"", "a\nb"}}},
		{"no space after colon", "data:x\n\n", []event{{"", "x"}}},
		{"unterminated last event", "data: last", []event{{"", "last"}}},
		{"ndjson", "{\"type\":\"a\"}\n{\"type\":\"b\"}\n", []event{{"", `{"type":"a"}`}, {"", `{"type":"b"}`}}},
		{"event without data is dropped", "event: x\n\ndata: y\n\n", []event{{"", "y"}}},
		{"unknown field ignored", "id: 7\nretry: 10\ndata: z\n\n", []event{{"", "z"}}},
	}
	for _, tc := range cases {
		for _, split := range []int{1, 2, 5, 1000} {
			got := decodeAll(t, tc.in, split)
			if len(got) != len(tc.want) {
				t.Fatalf("%s split %d: got %v", tc.name, split, got)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("%s split %d: event %d = %+v, want %+v", tc.name, split, i, got[i], tc.want[i])
				}
			}
		}
	}
}

func TestDecoderStopAndLimit(t *testing.T) {
	var d Decoder
	n := 0
	_ = d.Feed([]byte("data: 1\n\ndata: 2\n\n"), func(_, _ []byte) bool { n++; return false })
	_ = d.Feed([]byte("data: 3\n\n"), func(_, _ []byte) bool { n++; return true })
	if n != 1 || !d.Stopped() {
		t.Fatalf("handler ran %d times after stop", n)
	}
	var big Decoder
	err := big.Feed(bytes.Repeat([]byte("x"), MaxEventBytes+1), func(_, _ []byte) bool { return true })
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\n\r\t", "héllo 世界", "bad\xffutf8", "sep\u2028\u2029", "<tag>&"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back != want {
			t.Fatalf("%q round-tripped to %q", s, back)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\xff")
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(AppendString(nil, s), &back); err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("%q → %q", s, back)
		}
	})
}

func TestChunkWriter(t *testing.T) {
	w := NewChunkWriter("fallback", true)
	w.Init("id-1", "model-x")
	w.Init("ignored", "ignored")
	w.Content(0, `"hi"`)
	w.ToolCall(0, 0, "call_0", "f", `"{}"`, `{"google":{"thought_signature":"s"}}`)
	w.ToolArgs(0, 0, `"x"`)
	w.Finish(0, "tool_calls")
	w.Usage(&providers.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}, nil)
	w.Error(apierror.New(502, "upstream_error", "boom"))
	w.Done()
	var buf bytes.Buffer
	if err := w.Flush(&buf); err != nil {
		t.Fatal(err)
	}
	evs := strings.Split(strings.TrimSuffix(buf.String(), "\n\n"), "\n\n")
	if len(evs) != 7 {
		t.Fatalf("%d events:\n%s", len(evs), buf.String())
	}
	for i, ev := range evs[:6] {
		payload := strings.TrimPrefix(ev, "data: ")
		if !json.Valid([]byte(payload)) {
			t.Fatalf("event %d not JSON: %s", i, ev)
		}
		if i < 5 && !strings.Contains(payload, `"id":"id-1"`) {
			t.Fatalf("event %d lost the id: %s", i, ev)
		}
	}
	if !strings.Contains(evs[0], `"delta":{"role":"assistant","content":"hi"}`) ||
		!strings.Contains(evs[1], `"extra_content":{"google":{"thought_signature":"s"}}`) ||
		!strings.Contains(evs[3], `"delta":{},"logprobs":null,"finish_reason":"tool_calls"`) ||
		!strings.Contains(evs[4], `"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3`) ||
		!strings.Contains(evs[5], `"error":{"message":"boom"`) || evs[6] != "data: [DONE]" {
		t.Fatalf("events:\n%s", buf.String())
	}
	if buf.Reset(); w.Flush(&buf) != nil || buf.Len() != 0 {
		t.Fatal("flush did not empty the buffer")
	}
}

func TestParseDataURL(t *testing.T) {
	cases := []struct{ in, mime, data string }{
		{"data:image/png;base64,AAA=", "image/png", "AAA="},
		{"data:image/jpeg;name=x.jpg;base64,QQ==", "image/jpeg", "QQ=="},
		{"data:text/plain,hello", "", ""},
		{"https://x/a.png", "", ""},
	}
	for _, tc := range cases {
		m, d, ok := ParseDataURL(tc.in)
		if ok != (tc.mime != "") || m != tc.mime || d != tc.data {
			t.Errorf("ParseDataURL(%q) = %q %q %v", tc.in, m, d, ok)
		}
	}
}

func TestMimeFromURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://x/a.PNG": "image/png", "gs://b/doc.pdf": "application/pdf", "https://x/v.mp4?x=1": "video/mp4",
		"https://x.com/noext": "image/jpeg", "https://x.webp/path": "image/jpeg",
	} {
		if got := MimeFromURL(in); got != want {
			t.Errorf("MimeFromURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseEmbedding(t *testing.T) {
	cases := []struct {
		body  string
		input []string
		param string
	}{
		{`{"model":"m","input":"one"}`, []string{"one"}, ""},
		{`{"model":"m","input":["a","b"],"encoding_format":"base64"}`, []string{"a", "b"}, ""},
		{`{"model":"m","input":[1,2,3]}`, nil, "input"},
		{`{"model":"m"}`, nil, "input"},
		{`{"model":"m","input":[]}`, nil, "input"},
		{`{"model":"m","input":"x","encoding_format":"int8"}`, nil, "encoding_format"},
	}
	for _, tc := range cases {
		r, err := ParseEmbedding([]byte(tc.body))
		if tc.param != "" {
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Param != tc.param {
				t.Errorf("%s: err = %v", tc.body, err)
			}
			continue
		}
		if err != nil || strings.Join(r.Input, "|") != strings.Join(tc.input, "|") {
			t.Errorf("%s: %v %v", tc.body, r, err)
		}
	}
}

func TestEmbeddingList(t *testing.T) {
	out := EmbeddingList("m", [][]float64{{0.5, -1}}, false, &providers.Usage{PromptTokens: 2, TotalTokens: 2})
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,-1]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`
	if string(out) != want {
		t.Fatalf("got %s", out)
	}
	b64 := EmbeddingList("m", [][]float64{{0.5}}, true, nil)
	if !strings.Contains(string(b64), `"embedding":"AAAAPw=="`) {
		t.Fatalf("got %s", b64)
	}
}

func TestErrorBody(t *testing.T) {
	got := string(ErrorBody("p", 503, "", "", nil, []byte(strings.Repeat("é", 400))))
	if !json.Valid([]byte(got)) || !strings.Contains(got, `"message":"p returned HTTP 503: éé`) || !strings.Contains(got, `"type":"server_error"`) || !strings.Contains(got, "…") {
		t.Fatalf("got %s", got)
	}
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 408: "timeout_error", 429: "rate_limit_exceeded", 529: "server_error"} {
		if TypeForStatus(status) != typ {
			t.Errorf("TypeForStatus(%d) = %s", status, TypeForStatus(status))
		}
	}
}

func TestParseChat(t *testing.T) {
	r, err := ParseChat([]byte(`{"model":"m","stop":"x","tool_choice":{"type":"function","function":{"name":"f"}},"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stop) != 1 || r.ToolChoice.Mode != "function" || r.ToolChoice.Name != "f" || r.Messages[0].Content.JoinText() != "a\nb" {
		t.Fatalf("%+v", r)
	}
	var ae *apierror.Error
	if _, err := ParseChat([]byte(`{"messages":[{"role":"user","content":5}]}`)); !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("err = %v", err)
	}
}
