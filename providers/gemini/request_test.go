package gemini

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func TestBuildRequestGolden(t *testing.T) {
	got, err := BuildRequest(goldentest.Read(t, "testdata/chat_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	goldentest.JSON(t, got, "testdata/chat_request.gemini.json")
}

func TestBuildRequestFields(t *testing.T) {
	cases := []struct {
		name string
		body string
		want map[string]string
	}{
		{"plain", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"contents": `[{"role":"user","parts":[{"text":"hi"}]}]`, "generationConfig": ""}},
		{"json_object", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"generationConfig": `{"responseMimeType":"application/json"}`}},
		{"tool_choice auto", `{"model":"m","tool_choice":"auto","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"toolConfig": `{"functionCallingConfig":{"mode":"AUTO"}}`}},
		{"tool_choice none", `{"model":"m","tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"toolConfig": `{"functionCallingConfig":{"mode":"NONE"}}`}},
		{"tool_choice required", `{"model":"m","tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"toolConfig": `{"functionCallingConfig":{"mode":"ANY"}}`}},
		{"reasoning_effort", `{"model":"m","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"generationConfig": `{"thinkingConfig":{"thinkingBudget":24576}}`}},
		{"thinking disabled", `{"model":"m","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"generationConfig": `{"thinkingConfig":{"thinkingBudget":0}}`}},
		{"max_completion_tokens wins", `{"model":"m","max_tokens":5,"max_completion_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"generationConfig": `{"maxOutputTokens":9}`}},
		{"gs uri pdf", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"gs://b/doc.pdf"}}]}]}`,
			map[string]string{"contents": `[{"role":"user","parts":[{"fileData":{"mimeType":"application/pdf","fileUri":"gs://b/doc.pdf"}}]}]`}},
		{"tool name from message name", `{"model":"m","messages":[{"role":"tool","tool_call_id":"x","name":"f","content":"ok"}]}`,
			map[string]string{"contents": `[{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"ok"}}}]}]`}},
		{"safety settings", `{"model":"m","safety_settings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],"messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"safetySettings": `[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]`}},
		{"repeated call ids name the latest", `{"model":"m","messages":[
			{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"a","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_0","content":"1"},
			{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"b","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_0","content":"2"}]}`,
			map[string]string{"contents": `[{"role":"model","parts":[{"functionCall":{"name":"a","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"a","response":{"output":"1"}}}]},{"role":"model","parts":[{"functionCall":{"name":"b","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"b","response":{"output":"2"}}}]}]`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatal(err)
			}
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
		{"unknown tool id", `{"model":"m","messages":[{"role":"tool","tool_call_id":"nope","content":"x"}]}`, "messages[0].tool_call_id"},
		{"args not object", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"bad effort", `{"model":"m","reasoning_effort":"max","messages":[{"role":"user","content":"x"}]}`, "reasoning_effort"},
		{"bad response_format", `{"model":"m","response_format":{"type":"xml"},"messages":[{"role":"user","content":"x"}]}`, "response_format.type"},
		{"bad image", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"not a url"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"only system", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages"},
		{"bad schema", `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":[1]}}],"messages":[{"role":"user","content":"x"}]}`, "tools[0].function.parameters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildRequest([]byte(tc.body))
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tc.param {
				t.Fatalf("err = %#v, want 400 for %s", err, tc.param)
			}
		})
	}
}

func TestCleanSchema(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty object", `{"type":"object","properties":{}}`, ``},
		{"null", `null`, ``},
		{"const", `{"type":"object","properties":{"k":{"const":"x"}}}`, `{"properties":{"k":{"enum":["x"]}},"type":"object"}`},
		{"oneOf", `{"type":"object","properties":{"k":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`, `{"properties":{"k":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"type":"object"}`},
		{"nested items ref", `{"type":"object","properties":{"l":{"type":"array","items":{"$ref":"#/definitions/i"}}},"definitions":{"i":{"type":"integer","format":"int64"}}}`, `{"properties":{"l":{"items":{"format":"int64","type":"integer"},"type":"array"}},"type":"object"}`},
		{"recursive ref bounded", `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}}}}}`, ``},
		{"missing ref", `{"type":"object","properties":{"n":{"$ref":"#/$defs/zz"}}}`, `{"properties":{"n":{"type":"object"}},"type":"object"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CleanSchema(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if tc.name == "recursive ref bounded" {
					if len(got) == 0 {
						t.Fatal("recursive schema vanished")
					}
					return
				}
				if got != nil {
					t.Fatalf("got %s, want nothing", got)
				}
				return
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestModel(t *testing.T) {
	for in, ok := range map[string]bool{
		"gemini-2.5-flash": true, "models/gemini-pro": true, "claude-3-5-sonnet-v2@20241022": true,
		"": false, "../x": false, "a/b": false, "m?alt=json": false, "m:predict": false,
	} {
		if _, err := Model(in); (err == nil) != ok {
			t.Errorf("Model(%q) err = %v", in, err)
		}
	}
}
