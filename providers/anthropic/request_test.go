package anthropic

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func TestBuildRequestGolden(t *testing.T) {
	for _, name := range []string{"chat_request", "thinking_request"} {
		t.Run(name, func(t *testing.T) {
			in := goldentest.Read(t, "testdata/"+name+".json")
			var probe struct{ Stream bool }
			_ = json.Unmarshal(in, &probe)
			got, err := BuildRequest(in, Options{Stream: probe.Stream})
			if err != nil {
				t.Fatal(err)
			}
			goldentest.JSON(t, got, "testdata/"+name+".anthropic.json")
		})
	}
}

func TestBuildRequestFields(t *testing.T) {
	cases := []struct {
		name string
		body string
		opt  Options
		want map[string]string // gjson-like dotted path → JSON
	}{
		{
			name: "defaults",
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want: map[string]string{"max_tokens": "4096", "model": `"m"`},
		},
		{
			name: "max_tokens",
			body: `{"model":"m","max_tokens":77,"messages":[{"role":"user","content":"hi"}]}`,
			want: map[string]string{"max_tokens": "77"},
		},
		{
			name: "tool_choice required",
			body: `{"model":"m","tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			want: map[string]string{"tool_choice": `{"type":"any"}`},
		},
		{
			name: "tool_choice none",
			body: `{"model":"m","tool_choice":"none","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			want: map[string]string{"tool_choice": `{"type":"none"}`},
		},
		{
			name: "parallel false without tool_choice",
			body: `{"model":"m","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			want: map[string]string{"tool_choice": `{"type":"auto","disable_parallel_tool_use":true}`},
		},
		{
			name: "stop array",
			body: `{"model":"m","stop":["a","b"],"messages":[{"role":"user","content":"hi"}]}`,
			want: map[string]string{"stop_sequences": `["a","b"]`},
		},
		{
			name: "vertex",
			body: `{"model":"claude-3","messages":[{"role":"user","content":"hi"}]}`,
			opt:  Options{Vertex: true, Stream: true},
			want: map[string]string{"anthropic_version": `"vertex-2023-10-16"`, "model": "", "stream": "true"},
		},
		{
			name: "developer role and file part",
			body: `{"model":"m","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}}]}]}`,
			want: map[string]string{
				"system":   `[{"type":"text","text":"be brief"}]`,
				"messages": `[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]`,
			},
		},
		{
			name: "consecutive users merged, empty assistant skipped",
			body: `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":""},{"role":"user","content":"b"}]}`,
			want: map[string]string{"messages": `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`},
		},
		{
			name: "assistant thinking parts in content",
			body: `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"x"}]}]}`,
			want: map[string]string{"messages": `[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"x"}]}]`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildRequest([]byte(tc.body), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.want {
				if string(m[k]) != want {
					t.Errorf("%s = %s, want %s\nbody: %s", k, m[k], want, got)
				}
			}
			for _, k := range []string{"n", "seed", "logprobs", "presence_penalty", "response_format", "stream_options", "user"} {
				if _, ok := m[k]; ok {
					t.Errorf("field %s passed to Anthropic", k)
				}
			}
		})
	}
}

func TestBuildRequestErrors(t *testing.T) {
	cases := []struct {
		name, body, param string
	}{
		{"no messages", `{"model":"m","messages":[]}`, "messages"},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"only system", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages"},
		{"bad role", `{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
		{"bad image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"audio", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`, "messages[0].content[0].type"},
		{"image in system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]},{"role":"user","content":"x"}]}`, "messages[0].content[0]"},
		{"tool without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"bad args", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"bad tool_choice", `{"model":"m","tool_choice":"sometimes","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`, "tool_choice"},
		{"wrong type", `{"model":"m","messages":"hi"}`, "messages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildRequest([]byte(tc.body), Options{})
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("err = %v, want a 400", err)
			}
			if p, _ := ae.Param.(string); p != tc.param && !strings.HasPrefix(p, tc.param) {
				t.Fatalf("param = %v, want %s (%s)", ae.Param, tc.param, ae.Message)
			}
		})
	}
}
