package responses

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func wantAPIError(t *testing.T, err error, status int, param, contains string) {
	t.Helper()
	var e *apierror.Error
	if !errors.As(err, &e) {
		t.Fatalf("want apierror %d, got %v", status, err)
	}
	if e.Status != status {
		t.Fatalf("status %d, want %d (%s)", e.Status, status, e.Message)
	}
	if param != "" && e.Param != param {
		t.Fatalf("param %v, want %s (%s)", e.Param, param, e.Message)
	}
	if !strings.Contains(e.Message, contains) {
		t.Fatalf("message %q lacks %q", e.Message, contains)
	}
}

func TestParseBounds(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	meta := func(n int) string {
		m := map[string]string{}
		for i := range n {
			m[long(i+1)] = "v"
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name, body, param string
		ok                bool
	}{
		{"minimal", `{"model":"any/model-name","input":"hi"}`, "", true},
		{"no model", `{"input":"hi"}`, "model", false},
		{"no input", `{"model":"m"}`, "input", false},
		{"input number", `{"model":"m","input":3}`, "input", false},
		{"16 metadata pairs", `{"model":"m","input":"hi","metadata":` + meta(16) + `}`, "", true},
		{"17 metadata pairs", `{"model":"m","input":"hi","metadata":` + meta(17) + `}`, "metadata", false},
		{"key 64", `{"model":"m","input":"hi","metadata":{"` + long(64) + `":"v"}}`, "", true},
		{"key 65", `{"model":"m","input":"hi","metadata":{"` + long(65) + `":"v"}}`, "metadata", false},
		{"value 512", `{"model":"m","input":"hi","metadata":{"k":"` + long(512) + `"}}`, "", true},
		{"value 513", `{"model":"m","input":"hi","metadata":{"k":"` + long(513) + `"}}`, "metadata", false},
		{"temperature 2", `{"model":"m","input":"hi","temperature":2}`, "", true},
		{"temperature 2.1", `{"model":"m","input":"hi","temperature":2.1}`, "temperature", false},
		{"temperature -0.1", `{"model":"m","input":"hi","temperature":-0.1}`, "temperature", false},
		{"top_p 1", `{"model":"m","input":"hi","top_p":1}`, "", true},
		{"top_p 1.5", `{"model":"m","input":"hi","top_p":1.5}`, "top_p", false},
		{"top_p -1", `{"model":"m","input":"hi","top_p":-1}`, "top_p", false},
		{"truncation auto", `{"model":"m","input":"hi","truncation":"auto"}`, "", true},
		{"truncation disabled", `{"model":"m","input":"hi","truncation":"disabled"}`, "", true},
		{"truncation middle", `{"model":"m","input":"hi","truncation":"middle"}`, "truncation", false},
		{"include spec value", `{"model":"m","input":"hi","include":["file_search_call.results","message.input_image.image_url","computer_call_output.output.image_url"]}`, "", true},
		{"include encrypted reasoning", `{"model":"m","input":"hi","include":["reasoning.encrypted_content"]}`, "", true},
		{"include unknown", `{"model":"m","input":"hi","include":["secrets"]}`, "include", false},
		{"max_output_tokens 15", `{"model":"m","input":"hi","max_output_tokens":15}`, "max_output_tokens", false},
		{"reasoning effort bad", `{"model":"m","input":"hi","reasoning":{"effort":"huge"}}`, "reasoning.effort", false},
		{"reasoning effort xhigh", `{"model":"m","input":"hi","reasoning":{"effort":"xhigh"}}`, "", true},
		{"bad role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input", false},
		{"too deep", `{"model":"m","input":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, "", false},
		{"not json", `{"model":`, "", false},
		{"wrong type", `{"model":"m","input":"hi","temperature":"hot"}`, "", false},
		{"conversation and previous", `{"model":"m","input":"hi","previous_response_id":"resp_1","conversation":"conv_1"}`, "previous_response_id", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.body))
			if c.ok {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			wantAPIError(t, err, http.StatusBadRequest, c.param, "")
		})
	}
}

func TestParseNormalizesInput(t *testing.T) {
	r, err := Parse([]byte(`{"model":"m","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"type":"function_call_output","call_id":"c","output":"o"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Input) != 3 {
		t.Fatalf("%d items", len(r.Input))
	}
	want := []string{"input_text", "output_text"}
	for i, w := range want {
		it := gjson.ParseBytes(r.Input[i])
		if it.Get("type").Str != "message" || it.Get("content.0.type").Str != w || !strings.HasPrefix(it.Get("id").Str, "msg_") {
			t.Fatalf("item %d: %s", i, r.Input[i])
		}
		if responseOfItem(it.Get("id").Str) != r.ID {
			t.Fatalf("item id %s does not name response %s", it.Get("id").Str, r.ID)
		}
	}
	if id := gjson.GetBytes(r.Input[2], "id").Str; !strings.HasPrefix(id, "fco_") {
		t.Fatalf("function_call_output id %q", id)
	}
}

// TestBuiltInToolsRefused: every tool a translated provider cannot run is
// a 400 naming it, never dropped.
func TestBuiltInToolsRefused(t *testing.T) {
	for _, typ := range []string{"web_search", "web_search_preview", "file_search", "computer_use_preview", "computer", "mcp", "code_interpreter", "image_generation", "local_shell", "shell", "custom", "apply_patch"} {
		t.Run(typ, func(t *testing.T) {
			r := mustParse(t, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"`+typ+`"}]}`)
			_, err := ToChat(r, r.Input)
			wantAPIError(t, err, http.StatusBadRequest, "tools", "'"+typ+"'")
		})
	}
	t.Run("hosted tool_choice", func(t *testing.T) {
		r := mustParse(t, `{"model":"m","input":"hi","tool_choice":{"type":"web_search_preview"}}`)
		_, err := ToChat(r, r.Input)
		wantAPIError(t, err, http.StatusBadRequest, "tool_choice", "web_search_preview")
	})
}

func TestToChatRefusals(t *testing.T) {
	cases := []struct{ name, body, param, contains string }{
		{"background", `{"model":"m","input":"hi","background":true}`, "background", "background"},
		{"conversation", `{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation", "conversation"},
		{"prompt", `{"model":"m","input":"hi","prompt":{"id":"pmpt_1"}}`, "prompt", "prompt"},
		{"function_call without call_id", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input", "call_id"},
		{"output without call_id", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input", "call_id"},
		{"unresolved reference", `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input", "msg_1"},
		{"openai-only item", `{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`, "input", "web_search_call"},
		{"image by file id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`, "input", "image_url"},
		{"file by url", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/y.pdf"}]}]}`, "input", "file_url"},
		{"schema missing", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"x"}}}`, "text.format.schema", "schema"},
		{"bad format", `{"model":"m","input":"hi","text":{"format":{"type":"yaml"}}}`, "text.format.type", "yaml"},
		{"tool without name", `{"model":"m","input":"hi","tools":[{"type":"function"}]}`, "tools", "name"},
		{"bad tool_choice", `{"model":"m","input":"hi","tool_choice":"sometimes"}`, "tool_choice", "sometimes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustParse(t, c.body)
			_, err := ToChat(r, r.Input)
			wantAPIError(t, err, http.StatusBadRequest, c.param, c.contains)
		})
	}
}

// TestInstructionsNotInherited: only the current request's instructions
// reach the chat call, first, even when the history holds a system turn
// from an earlier request's input.
func TestInstructionsNotInherited(t *testing.T) {
	r := mustParse(t, `{"model":"m","input":"next","instructions":"now"}`)
	history := []Item{Item(`{"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]}`)}
	chat, err := ToChat(r, r.Conversation(history))
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(chat, "messages").Array()
	if len(msgs) != 3 || msgs[0].Get("role").Str != "system" || msgs[0].Get("content").Str != "now" || msgs[1].Get("content").Str != "first" {
		t.Fatalf("messages %s", gjson.GetBytes(chat, "messages").Raw)
	}
	r2 := mustParse(t, `{"model":"m","input":"next"}`)
	chat, _ = ToChat(r2, r2.Conversation(history))
	if gjson.GetBytes(chat, "messages.0.role").Str == "system" {
		t.Fatalf("a request without instructions got a system message: %s", chat)
	}
}

func TestFromChatStatus(t *testing.T) {
	cases := []struct{ finish, status, reason string }{
		{"stop", "completed", ""},
		{"tool_calls", "completed", ""},
		{"length", "incomplete", "max_output_tokens"},
		{"content_filter", "incomplete", "content_filter"},
	}
	for _, c := range cases {
		t.Run(c.finish, func(t *testing.T) {
			chat := `{"id":"x","object":"chat.completion","model":"p-model","choices":[{"index":0,"message":{"role":"assistant","content":"t"},"finish_reason":"` + c.finish + `"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"completion_tokens_details":{"reasoning_tokens":2}}}`
			resp, err := FromChat([]byte(chat), mustParse(t, `{"model":"m","input":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != c.status {
				t.Fatalf("status %s", resp.Status)
			}
			if c.reason == "" && (resp.IncompleteDetails != nil || resp.CompletedAt == nil) {
				t.Fatalf("completed response: %+v", resp)
			}
			if c.reason != "" && (resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != c.reason) {
				t.Fatalf("incomplete_details %+v", resp.IncompleteDetails)
			}
			if resp.Usage.OutputTokensDetails.ReasoningTokens != 2 || resp.Usage.TotalTokens != 7 || resp.Model != "p-model" {
				t.Fatalf("usage/model %+v %s", resp.Usage, resp.Model)
			}
		})
	}
	for _, bad := range []string{`{"choices":[]}`, `not json`, `[1]`} {
		if _, err := FromChat([]byte(bad), mustParse(t, `{"model":"m","input":"hi"}`)); err == nil {
			t.Fatalf("FromChat(%s) succeeded", bad)
		}
	}
}
