package messages

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func TestParseValidation(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"Hello"}]`
	cases := []struct {
		name  string
		body  string
		count bool
		// want is a part of the 400's message; "" means valid.
		want string
	}{
		{"minimal", `{"model":"claude-sonnet-4-5","max_tokens":1024,` + msgs + `}`, false, ""},
		{"count takes no max_tokens", `{"model":"claude-sonnet-4-5",` + msgs + `}`, true, ""},
		{"max_tokens required", `{"model":"claude-sonnet-4-5",` + msgs + `}`, false, "max_tokens: Field required"},
		{"max_tokens not negative", `{"model":"m","max_tokens":-1,` + msgs + `}`, false, "max_tokens: Input should be greater than or equal to 0"},
		{"max_tokens 0 warms the cache", `{"model":"m","max_tokens":0,` + msgs + `}`, false, ""},
		{"system turn", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"system","content":[{"type":"text","text":"b"}]}]}`, false, ""},
		{"system turn takes text only", `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, false, "not accepted in a system turn"},
		{"max_tokens a number", `{"model":"m","max_tokens":"10",` + msgs + `}`, false, "max_tokens: Input should be a valid"},
		{"model required", `{"max_tokens":10,` + msgs + `}`, false, "model: Field required"},
		{"messages required", `{"model":"m","max_tokens":10}`, false, "messages: Field required"},
		{"messages empty", `{"model":"m","max_tokens":10,"messages":[]}`, false, "messages: Field required"},
		{"role", `{"model":"m","max_tokens":10,"messages":[{"role":"tool","content":"x"}]}`, false, "messages.0.role: Input should be 'user', 'assistant' or 'system'"},
		{"content required", `{"model":"m","max_tokens":10,"messages":[{"role":"user"}]}`, false, "messages.0.content: Field required"},
		{"content shape", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":{"text":"x"}}]}`, false, "content must be a string or an array"},
		{"unknown block", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"video","text":"x"}]}]}`, false, "messages.0.content.0.type: Input tag \"video\""},
		{"block in wrong turn", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, false, "not accepted in a user turn"},
		{"image media type", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AA=="}}]}]}`, false, "media_type"},
		{"image source", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, false, "messages.0.content.0.source: Field required"},
		{"tool_use id", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, false, "messages.0.content.0.id: Field required"},
		{"tool_use input", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`, false, "input: Input should be a valid dictionary"},
		{"tool_result id", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, false, "tool_use_id: Field required"},
		{"tool_result block", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_use"}]}]}]}`, false, "content.0.content.0.type"},
		{"temperature", `{"model":"m","max_tokens":10,"temperature":1.5,` + msgs + `}`, false, "temperature: Input should be between 0 and 1"},
		{"top_p", `{"model":"m","max_tokens":10,"top_p":-1,` + msgs + `}`, false, "top_p"},
		{"system type", `{"model":"m","max_tokens":10,"system":[{"type":"image"}],` + msgs + `}`, false, "system.0.type: Input should be 'text'"},
		{"tool schema", `{"model":"m","max_tokens":10,"tools":[{"name":"f"}],` + msgs + `}`, false, "tools.0.input_schema: Field required"},
		{"server tool needs no schema", `{"model":"m","max_tokens":10,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + msgs + `}`, false, ""},
		{"tool names unique", `{"model":"m","max_tokens":10,"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}],` + msgs + `}`, false, "Tool names must be unique"},
		{"tool_choice type", `{"model":"m","max_tokens":10,"tool_choice":{"type":"function"},` + msgs + `}`, false, "tool_choice.type"},
		{"tool_choice name", `{"model":"m","max_tokens":10,"tool_choice":{"type":"tool"},` + msgs + `}`, false, "tool_choice.tool.name: Field required"},
		{"thinking budget", `{"model":"m","max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":500},` + msgs + `}`, false, "budget_tokens: Input should be greater than or equal to 1024"},
		{"thinking below max_tokens", `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000},` + msgs + `}`, false, "max_tokens: must be greater than thinking.budget_tokens"},
		{"thinking type", `{"model":"m","max_tokens":2000,"thinking":{"type":"on"},` + msgs + `}`, false, "thinking.type"},
		{"consecutive turns are merged by Anthropic, so accepted", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.body), c.count)
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if r == nil {
					t.Fatal("no request")
				}
				return
			}
			ae, ok := err.(*apierror.Error)
			if !ok {
				t.Fatalf("error %v (%T), want a 400", err, err)
			}
			if ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, c.want) {
				t.Fatalf("got %d %q, want 400 containing %q", ae.Status, ae.Message, c.want)
			}
			if ae.Type != TypeInvalidRequest {
				t.Fatalf("type %q", ae.Type)
			}
		})
	}
}

// TestCountBody: the count_tokens answer's shape.
func TestCountBody(t *testing.T) {
	if got := string(CountBody(42)); got != `{"input_tokens":42}` {
		t.Fatal(got)
	}
}
