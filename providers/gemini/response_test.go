package gemini

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func TestResponseGolden(t *testing.T) {
	cases := []struct {
		name  string
		usage providers.Usage
	}{
		{"response_tools", providers.Usage{PromptTokens: 120, CompletionTokens: 80, TotalTokens: 200, CachedTokens: 64, ReasoningTokens: 50}},
		{"response_blocked", providers.Usage{PromptTokens: 9, TotalTokens: 9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, u, err := Chat{Provider: Slug}.Response(&providers.Call{Model: "gemini"}, goldentest.Read(t, "testdata/"+tc.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			goldentest.JSON(t, got, "testdata/"+tc.name+".openai.json")
			if *u != tc.usage {
				t.Fatalf("usage = %+v", *u)
			}
		})
	}
}

func TestFinishReason(t *testing.T) {
	cases := []struct {
		in    string
		tools bool
		want  string
	}{
		{"STOP", false, "stop"}, {"STOP", true, "tool_calls"}, {"MAX_TOKENS", true, "length"},
		{"SAFETY", false, "content_filter"}, {"RECITATION", false, "content_filter"}, {"BLOCKLIST", false, "content_filter"},
		{"PROHIBITED_CONTENT", false, "content_filter"}, {"SPII", false, "content_filter"}, {"OTHER", false, "stop"},
		{"MALFORMED_FUNCTION_CALL", false, "stop"},
	}
	for _, tc := range cases {
		if got := FinishReason(tc.in, tc.tools); got != tc.want {
			t.Errorf("FinishReason(%s,%v) = %s, want %s", tc.in, tc.tools, got, tc.want)
		}
	}
}

func TestError(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		msg, typ   string
		code       any
	}{
		{"google", string(goldentest.Read(t, "testdata/error_400.json")), 400, "API key not valid. Please pass a valid API key.", "invalid_request_error", "INVALID_ARGUMENT"},
		{"vertex array", `[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`, 429, "Resource exhausted", "rate_limit_exceeded", "RESOURCE_EXHAUSTED"},
		{"404 text", `Not Found`, 404, "google returned HTTP 404: Not Found", "not_found_error", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var env struct {
				Error struct {
					Message, Type string
					Code          any
				}
			}
			out := Chat{Provider: Slug}.Error(nil, tc.status, []byte(tc.body))
			if err := json.Unmarshal(out, &env); err != nil {
				t.Fatal(err)
			}
			if env.Error.Message != tc.msg || env.Error.Type != tc.typ || env.Error.Code != tc.code {
				t.Fatalf("got %s", out)
			}
		})
	}
}

func TestStreamGolden(t *testing.T) {
	cases := []struct {
		name    string
		include bool
		wantErr bool
		usage   *providers.Usage
	}{
		{"stream_tools", true, false, &providers.Usage{PromptTokens: 12, CompletionTokens: 35, TotalTokens: 47, CachedTokens: 4, ReasoningTokens: 10}},
		{"stream_error", false, true, nil},
		{"stream_truncated", false, true, nil},
	}
	for _, tc := range cases {
		in := goldentest.Read(t, "testdata/"+tc.name+".sse")
		body := `{"stream":true}`
		if tc.include {
			body = `{"stream":true,"stream_options":{"include_usage":true}}`
		}
		c := &providers.Call{Model: "gemini", Stream: true, Body: []byte(body)}
		var first []byte
		for _, split := range []int{0, 1, 2, 5, 17, 100} {
			out, u, err := goldentest.RunStream(Chat{Provider: Slug}, c, in, split)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s split %d: err %v", tc.name, split, err)
			}
			if (u == nil) != (tc.usage == nil) || (u != nil && *u != *tc.usage) {
				t.Fatalf("%s split %d: usage %+v", tc.name, split, u)
			}
			if first == nil {
				first = out
				goldentest.SSE(t, out, "testdata/"+tc.name+".openai.sse")
			} else if strings.Join(goldentest.Events(out), "") != strings.Join(goldentest.Events(first), "") {
				t.Fatalf("%s split %d differs", tc.name, split)
			}
		}
	}
}

func TestStreamAccumulates(t *testing.T) {
	c := &providers.Call{Model: "gemini", Stream: true, Body: []byte(`{"stream_options":{"include_usage":true}}`)}
	out, _, err := goldentest.RunStream(Chat{Provider: Slug}, c, goldentest.Read(t, "testdata/stream_tools.sse"), 3)
	if err != nil {
		t.Fatal(err)
	}
	acc := goldentest.Accumulate(t, out)
	m := acc.Choices[0].Message
	if m.Content != "Let me check the weather.\n" || len(m.ToolCalls) != 2 ||
		m.ToolCalls[0].ID != "call_0" || m.ToolCalls[1].ID != "call_1" ||
		m.ToolCalls[1].Function.Arguments != `{"city": "Tokyo","unit": "c"}` {
		t.Fatalf("message = %+v", m)
	}
	if acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.CompletionTokensDetails.ReasoningTokens != 10 {
		t.Fatalf("finish %s usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
	if !bytes.Contains(out, []byte(`"extra_content":{"google":{"thought_signature":"CiQBVKhc"}}`)) {
		t.Fatal("thought signature not passed on")
	}
}

func TestStreamCandidates(t *testing.T) {
	in := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]},\"index\":0},{\"content\":{\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"MAX_TOKENS\",\"index\":1}]}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"c\"}]},\"finishReason\":\"STOP\",\"index\":0}]}\n\n" +
		"data: {\"candidates\":[{\"index\":100000}]}\n\n"
	out, _, err := goldentest.RunStream(Chat{Provider: Slug}, &providers.Call{Model: "g", Stream: true}, []byte(in), 0)
	if err != nil {
		t.Fatal(err)
	}
	acc := goldentest.Accumulate(t, out)
	if len(acc.Choices) != 2 || acc.Choices[0].Message.Content != "ac" || acc.Choices[1].Message.Content != "b" ||
		acc.Choices[1].FinishReason != "length" || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("choices = %+v", acc.Choices)
	}
}

func TestEmbeddings(t *testing.T) {
	got, err := buildEmbedRequest(goldentest.Read(t, "testdata/embed_request.json"), "text-embedding-004")
	if err != nil {
		t.Fatal(err)
	}
	goldentest.JSON(t, got, "testdata/embed_request.gemini.json")
	for _, format := range []string{"float", "base64"} {
		c := &providers.Call{Model: "text-embedding-004", Body: []byte(`{"encoding_format":"` + format + `"}`)}
		out, _, err := embeddings{}.Response(c, goldentest.Read(t, "testdata/embed_response.json"))
		if err != nil {
			t.Fatal(err)
		}
		goldentest.JSON(t, out, "testdata/embed_response."+format+".openai.json")
	}
}

// A stream cut in the middle of its last event is a truncated stream
// (stream_truncated), as one cut between events is, not a malformed
// event: the provider sent nothing wrong, the connection ended.
func TestStreamCutMidEvent(t *testing.T) {
	whole := goldentest.Read(t, "testdata/stream_tools.sse")
	for _, cut := range []int{40, 20, 5} {
		c := &providers.Call{Model: "gemini", Stream: true, Body: []byte(`{"stream":true}`)}
		out, _, err := goldentest.RunStream(Chat{Provider: Slug}, c, whole[:len(whole)-cut], 0)
		if err == nil || !bytes.Contains(out, []byte(`"stream_truncated"`)) || bytes.Contains(out, []byte("malformed")) {
			t.Fatalf("cut %d bytes before the end: err %v, out ends %s", cut, err, out[max(0, len(out)-200):])
		}
	}
}
