package messages

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// compact normalises a JSON text for comparison.
func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("invalid JSON %v: %s", err, s)
	}
	return b.String()
}

// The requests are the examples of Anthropic's Messages API reference and
// its tool-use, vision and extended-thinking guides.
func TestToChat(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{
			name: "basic request",
			in:   `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"Hello, world"}]}`,
			want: `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"Hello, world"}],"max_tokens":1024}`,
		},
		{
			name: "system prompt and multi-turn",
			in: `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You are a helpful assistant.",
				"messages":[{"role":"user","content":"Hello there."},{"role":"assistant","content":"Hi, I'm Claude. How can I help you?"},{"role":"user","content":"Can you explain LLMs in plain English?"}],
				"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["\n\nHuman:"],"metadata":{"user_id":"u-1"}}`,
			want: `{"model":"claude-sonnet-4-5","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello there."},{"role":"assistant","content":"Hi, I'm Claude. How can I help you?"},{"role":"user","content":"Can you explain LLMs in plain English?"}],"max_tokens":1024,"temperature":0.5,"top_p":0.9,"stop":["\n\nHuman:"],"user":"u-1"}`,
		},
		{
			name: "system blocks with cache_control",
			in:   `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"One."},{"type":"text","text":"Two.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"One.\nTwo."},{"role":"user","content":"Hi"}],"max_tokens":10}`,
		},
		{
			name: "images base64 and url",
			in: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}},
				{"type":"image","source":{"type":"url","url":"https://upload.wikimedia.org/a.jpg"}},
				{"type":"text","text":"Describe these images."}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}},{"type":"image_url","image_url":{"url":"https://upload.wikimedia.org/a.jpg"}},{"type":"text","text":"Describe these images."}]}],"max_tokens":10}`,
		},
		{
			name: "tools, tool_use and tool_result round trip",
			in: `{"model":"claude-sonnet-4-5","max_tokens":1024,
				"tools":[{"name":"get_weather","description":"Get the current weather in a given location","input_schema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}],
				"tool_choice":{"type":"auto","disable_parallel_tool_use":true},
				"messages":[
				{"role":"user","content":"What's the weather like in San Francisco?"},
				{"role":"assistant","content":[{"type":"text","text":"<thinking>I need to use get_weather</thinking>"},{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":"15 degrees"},{"type":"text","text":"And tomorrow?"}]}]}`,
			want: `{"model":"claude-sonnet-4-5","messages":[
				{"role":"user","content":"What's the weather like in San Francisco?"},
				{"role":"assistant","content":"<thinking>I need to use get_weather</thinking>","tool_calls":[{"id":"toolu_01A09q90qw90lq917835lq9","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"San Francisco, CA\"}"}}]},
				{"role":"tool","content":"15 degrees","tool_call_id":"toolu_01A09q90qw90lq917835lq9"},
				{"role":"user","content":"And tomorrow?"}],
				"max_tokens":1024,
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a given location","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}],
				"tool_choice":"auto","parallel_tool_calls":false}`,
		},
		{
			name: "tool_result with blocks, an image and is_error",
			in: `{"model":"m","max_tokens":10,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[
				{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}]}]}`,
			want: `{"model":"m","messages":[
				{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","content":"Error: a\nb","tool_call_id":"t1"},
				{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]}],
				"max_tokens":10,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
		},
		{
			name: "named tool_choice",
			in:   `{"model":"m","max_tokens":10,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"x"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":10,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		},
		{
			name: "thinking, previous thinking blocks dropped, stream",
			in: `{"model":"m","max_tokens":16000,"stream":true,"thinking":{"type":"enabled","budget_tokens":10000},"messages":[
				{"role":"user","content":"Are there an infinite number of prime numbers such that n mod 4 == 3?"},
				{"role":"assistant","content":[{"type":"thinking","thinking":"Let me think","signature":"EqQBCgIYAh"},{"type":"redacted_thinking","data":"abc"},{"type":"text","text":"Yes."}]},
				{"role":"user","content":"Why?"}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":"Are there an infinite number of prime numbers such that n mod 4 == 3?"},{"role":"assistant","content":"Yes."},{"role":"user","content":"Why?"}],"max_tokens":16000,"stream":true,"stream_options":{"include_usage":true},"reasoning_effort":"medium"}`,
		},
		{
			name: "pdf and text documents",
			in: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
				{"type":"document","title":"report.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0x"}},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The grass is green."}}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0x","filename":"report.pdf"}},{"type":"text","text":"The grass is green."}]}],"max_tokens":10}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.in), false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ToChat(r)
			if err != nil {
				t.Fatal(err)
			}
			if want := compact(t, c.want); string(got) != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// What a chat target cannot take is a 400 naming it, never a silently
// different request.
func TestToChatUnsupported(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"server tool", `{"model":"m","max_tokens":10,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "web_search_20250305"},
		{"document url", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, "url source"},
		{"search result", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"search_result"}]}]}`, "search_result block"},
		{"server tool use", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"server_tool_use"}]}]}`, "server_tool_use block"},
		{"mcp servers", `{"model":"m","max_tokens":10,"mcp_servers":[{"type":"url"}],"messages":[{"role":"user","content":"x"}]}`, "mcp_servers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.in), false)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ToChat(r)
			ae, ok := err.(*apierror.Error)
			if !ok || ae.Status != 400 || !strings.Contains(ae.Message, c.want) {
				t.Fatalf("got %v, want a 400 naming %q", err, c.want)
			}
		})
	}
}

// FuzzToChat: whatever the body, Parse and ToChat answer or refuse, and
// what ToChat makes is JSON.
func FuzzToChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s"}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"r"}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body, false)
		if err != nil {
			return
		}
		out, err := ToChat(r)
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON %s", out)
		}
	})
}
