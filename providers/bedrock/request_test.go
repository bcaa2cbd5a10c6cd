package bedrock

import (
	"errors"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func TestConverseRequestGolden(t *testing.T) {
	got, err := ConverseRequest(readTestdata(t, "chat_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := readTestdata(t, "converse_request.json"); !jsonEqual(t, got, want) {
		t.Fatalf("converse request differs\n got: %s\nwant: %s", got, want)
	}
}

func TestConverseRequest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "minimal",
			in:   `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`,
		},
		{
			name: "max_tokens alone and stop string",
			in:   `{"messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stop":"END"}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"maxTokens":10,"stopSequences":["END"]}}`,
		},
		{
			name: "null fields are ignored",
			in:   `{"messages":[{"role":"user","content":"hi"}],"stop":null,"top_k":null,"thinking":null,"tool_choice":null}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`,
		},
		{
			name: "consecutive user messages merge; empty text is skipped",
			in:   `{"messages":[{"role":"user","content":"a"},{"role":"user","content":""},{"role":"user","content":[{"type":"text","text":"b"}]}]}`,
			want: `{"messages":[{"role":"user","content":[{"text":"a"},{"text":"b"}]}]}`,
		},
		{
			name: "assistant text and tool call",
			in: `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"t1","content":""}],
				"tools":[{"type":"function","function":{"name":"f","parameters":null}}]}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"text":"Let me look."},{"toolUse":{"toolUseId":"t1","name":"f","input":{"a":1}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":" "}]}}]}],
				"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}]}}`,
		},
		{
			name: "tool_choice auto",
			in:   `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"auto":{}}}}`,
		},
		{
			name: "tool_choice required is any",
			in:   `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"any":{}}}}`,
		},
		{
			name: "tool_choice none drops the tools",
			in:   `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`,
		},
		{
			name: "tool_choice none keeps the tools the history needs",
			in: `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"ok"}],
				"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			want: `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"ok"}]}}]}],
				"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}]}}`,
		},
		{
			name: "jpeg data url",
			in:   `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}}]}]}`,
			want: `{"messages":[{"role":"user","content":[{"image":{"format":"jpeg","source":{"bytes":"/9j/4AAQ"}}}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConverseRequest([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Fatalf("\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestConverseRequestErrors(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantParam string
		wantMsg   string
	}{
		{"not json", `{`, "", "invalid chat request"},
		{"no messages", `{"messages":[]}`, "messages", "at least one"},
		{"n above one", `{"messages":[{"role":"user","content":"x"}],"n":2}`, "n", "one choice"},
		{"http image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			"messages[0].content[0].image_url.url", "cannot fetch image URLs"},
		{"not base64 data url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`,
			"messages[0].content[0].image_url.url", "base64 data URL"},
		{"unsupported image type", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/tiff;base64,AAAA"}}]}]}`,
			"messages[0].content[0].image_url.url", "image/tiff"},
		{"audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`,
			"messages[0].content[0].type", "input_audio"},
		{"image in system", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}`,
			"messages[0].content[0].type", "only text parts"},
		{"unknown role", `{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role", "function"},
		{"tool without id", `{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", "tool_call_id"},
		{"bad tool arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"[1]"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments", "JSON object"},
		{"bad stop", `{"messages":[{"role":"user","content":"x"}],"stop":5}`, "stop", "stop must be"},
		{"tool without name", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name", "required"},
		{"non-function tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search","function":{"name":"f"}}]}`, "tools[0].type", "web_search"},
		{"bad tool_choice string", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"always"}`, "tool_choice", "always"},
		{"bad tool_choice object", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function"}}`, "tool_choice", "tool_choice must be"},
		{"content not string or parts", `{"messages":[{"role":"user","content":42}]}`, "messages[0].content", "string or an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ConverseRequest([]byte(tt.in))
			var ae *apierror.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *apierror.Error", err)
			}
			if ae.Status != 400 {
				t.Fatalf("status = %d", ae.Status)
			}
			if tt.wantParam != "" && ae.Param != tt.wantParam {
				t.Fatalf("param = %v, want %s", ae.Param, tt.wantParam)
			}
			if !strings.Contains(ae.Message, tt.wantMsg) {
				t.Fatalf("message %q lacks %q", ae.Message, tt.wantMsg)
			}
		})
	}
}
