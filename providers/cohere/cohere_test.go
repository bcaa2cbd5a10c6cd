package cohere

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func TestBuildRequestGolden(t *testing.T) {
	got, err := BuildRequest(goldentest.Read(t, "testdata/chat_request.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	goldentest.JSON(t, got, "testdata/chat_request.cohere.json")
}

func TestBuildRequestFields(t *testing.T) {
	cases := []struct {
		name, body string
		want       map[string]string
	}{
		{"named tool", `{"model":"m","tool_choice":{"type":"function","function":{"name":"b"}},"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}],"messages":[{"role":"user","content":"x"}]}`,
			map[string]string{"tool_choice": `"REQUIRED"`, "tools": `[{"type":"function","function":{"name":"b"}}]`}},
		{"none", `{"model":"m","tool_choice":"none","tools":[{"type":"function","function":{"name":"a"}}],"messages":[{"role":"user","content":"x"}]}`,
			map[string]string{"tool_choice": `"NONE"`}},
		{"auto omitted", `{"model":"m","tool_choice":"auto","tools":[{"type":"function","function":{"name":"a"}}],"messages":[{"role":"user","content":"x"}]}`,
			map[string]string{"tool_choice": ``}},
		{"json schema", `{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"}}},"messages":[{"role":"user","content":"x"}]}`,
			map[string]string{"response_format": `{"type":"json_object","json_schema":{"type":"object"}}`}},
		{"thinking", `{"model":"m","thinking":{"type":"enabled","budget_tokens":100},"messages":[{"role":"developer","content":"x"}]}`,
			map[string]string{"thinking": `{"type":"enabled","token_budget":100}`, "messages": `[{"role":"system","content":"x"}]`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildRequest([]byte(tc.body), false)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			_ = json.Unmarshal(got, &m)
			for k, want := range tc.want {
				if string(m[k]) != want {
					t.Errorf("%s = %s, want %s", k, m[k], want)
				}
			}
		})
	}
}

func TestBuildRequestErrors(t *testing.T) {
	cases := []struct{ name, body, param string }{
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"unknown named tool", `{"model":"m","tool_choice":{"type":"function","function":{"name":"z"}},"tools":[{"type":"function","function":{"name":"a"}}],"messages":[{"role":"user","content":"x"}]}`, "tool_choice"},
		{"audio", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`, "messages[0].content[0].type"},
		{"role", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildRequest([]byte(tc.body), false)
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Param != tc.param {
				t.Fatalf("err = %#v", err)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	cases := []struct {
		name   string
		op     providers.Operation
		path   string
		s      providers.Settings
		url    string
		status int
	}{
		{"chat", providers.OpChat, "/chat/completions", providers.Settings{APIKey: "k"}, "https://api.cohere.com/v2/chat", 0},
		{"embed", providers.OpEmbeddings, "/embeddings", providers.Settings{APIKey: "k"}, "https://api.cohere.com/v2/embed", 0},
		{"rerank passthrough", providers.OpProxy, "/rerank", providers.Settings{APIKey: "k"}, "https://api.cohere.com/v2/rerank", 0},
		{"custom host", providers.OpChat, "/chat/completions", providers.Settings{APIKey: "k", CustomHost: "http://127.0.0.1:8080"}, "http://127.0.0.1:8080/v2/chat", 0},
		{"no key", providers.OpChat, "/chat/completions", providers.Settings{}, "", 401},
		{"completions", providers.OpCompletions, "/completions", providers.Settings{APIKey: "k"}, "", 400},
		{"bad host", providers.OpChat, "/chat/completions", providers.Settings{APIKey: "k", CustomHost: "ftp://x"}, "", 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"x"}],"input":"x"}`
			u := &providers.Upstream{Header: http.Header{}}
			err := provider{}.Prepare(&providers.Call{Op: tc.op, Method: "POST", Path: tc.path, Body: []byte(body)}, &tc.s, u)
			if tc.status != 0 {
				var ae *apierror.Error
				if !errors.As(err, &ae) || ae.Status != tc.status {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.URL.String() != tc.url || u.Header.Get("Authorization") != "Bearer k" {
				t.Fatalf("url %s auth %q", u.URL, u.Header.Get("Authorization"))
			}
		})
	}
}

func TestResponseGolden(t *testing.T) {
	cases := []struct {
		name  string
		usage providers.Usage
	}{
		{"response_tools", providers.Usage{PromptTokens: 37, CompletionTokens: 28, TotalTokens: 65}},
		{"response_text", providers.Usage{PromptTokens: 5, CompletionTokens: 10, TotalTokens: 15, CachedTokens: 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, u, err := chat{}.Response(&providers.Call{Model: "command-a-03-2025"}, goldentest.Read(t, "testdata/"+tc.name+".json"))
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

func TestError(t *testing.T) {
	out := chat{}.Error(nil, 401, goldentest.Read(t, "testdata/error_401.json"))
	if !strings.Contains(string(out), `"message":"invalid api token","type":"authentication_error"`) {
		t.Fatalf("got %s", out)
	}
}

func TestStreamGolden(t *testing.T) {
	cases := []struct {
		file    string
		include bool
		wantErr bool
		usage   *providers.Usage
	}{
		{"stream_tools.sse", true, false, &providers.Usage{PromptTokens: 37, CompletionTokens: 28, TotalTokens: 65}},
		{"stream_text.ndjson", false, false, &providers.Usage{PromptTokens: 20, CompletionTokens: 6, TotalTokens: 26}},
		{"stream_truncated.sse", false, true, nil},
	}
	for _, tc := range cases {
		body := `{}`
		if tc.include {
			body = `{"stream_options":{"include_usage":true}}`
		}
		c := &providers.Call{Model: "command-a-03-2025", Stream: true, Body: []byte(body)}
		in := goldentest.Read(t, "testdata/"+tc.file)
		var first string
		for _, split := range []int{0, 1, 3, 10, 64} {
			out, u, err := goldentest.RunStream(chat{}, c, in, split)
			if (err != nil) != tc.wantErr || (u == nil) != (tc.usage == nil) || (u != nil && *u != *tc.usage) {
				t.Fatalf("%s split %d: err %v usage %+v", tc.file, split, err, u)
			}
			got := strings.Join(goldentest.Events(out), "\n")
			if first == "" {
				first = got
				goldentest.SSE(t, out, "testdata/"+strings.Split(tc.file, ".")[0]+".openai.sse")
			} else if got != first {
				t.Fatalf("%s split %d differs", tc.file, split)
			}
		}
	}
	out, _, _ := goldentest.RunStream(chat{}, &providers.Call{Stream: true}, goldentest.Read(t, "testdata/stream_tools.sse"), 7)
	acc := goldentest.Accumulate(t, out)
	m := acc.Choices[0].Message
	if m.Content != "I will look up the weather." || len(m.ToolCalls) != 2 || m.ToolCalls[0].Function.Arguments != "{\n    \"location\": \"Toronto\"\n}" ||
		m.ToolCalls[1].Function.Arguments != "{}" || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("accumulated %+v", acc.Choices[0])
	}
}

func TestEmbeddings(t *testing.T) {
	got, err := buildEmbed(goldentest.Read(t, "testdata/embed_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	goldentest.JSON(t, got, "testdata/embed_request.cohere.json")
	c := &providers.Call{Model: "embed-v4.0", Body: []byte(`{}`)}
	out, u, err := embeddings{}.Response(c, goldentest.Read(t, "testdata/embed_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	goldentest.JSON(t, out, "testdata/embed_response.openai.json")
	if u.PromptTokens != 2 {
		t.Fatalf("usage %+v", u)
	}
}

// A stream cut in the middle of its last event is a truncated stream
// (stream_truncated), as one cut between events is, not a malformed
// event: the provider sent nothing wrong, the connection ended.
func TestStreamCutMidEvent(t *testing.T) {
	whole := goldentest.Read(t, "testdata/stream_tools.sse")
	for _, cut := range []int{60, 20, 3} {
		out, _, err := goldentest.RunStream(chat{}, &providers.Call{Stream: true, Body: []byte(`{}`)}, whole[:len(whole)-cut], 0)
		if err == nil || !strings.Contains(string(out), `"stream_truncated"`) || strings.Contains(string(out), "malformed") {
			t.Fatalf("cut %d bytes before the end: err %v, out ends %s", cut, err, out[max(0, len(out)-200):])
		}
	}
}
