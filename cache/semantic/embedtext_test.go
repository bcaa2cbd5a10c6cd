package semantic

import (
	"strings"
	"testing"
)

func TestEmbedText(t *testing.T) {
	long := strings.Repeat("a", MaxEmbedBytes+1)
	tests := []struct {
		name, body, want string
		ok               bool
	}{
		{"system prompt excluded, roles kept",
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of France?"}]}`,
			"user: What is the capital of France?", true},
		{"developer prompt excluded",
			`{"messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}]}`, "user: hi", true},
		{"several turns with roles",
			`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"capital of France?"}]}`,
			"user: hi\n\nassistant: hello\n\nuser: capital of France?", true},
		{"only the last four turns",
			`{"messages":[{"role":"user","content":"1"},{"role":"assistant","content":"2"},{"role":"user","content":"3"},{"role":"assistant","content":"4"},{"role":"user","content":"5"}]}`,
			"assistant: 2\n\nuser: 3\n\nassistant: 4\n\nuser: 5", true},
		{"text parts joined, name kept",
			`{"messages":[{"role":"user","name":"bob","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
			"user (bob): a\nb", true},
		{"text completion prompt", `{"model":"m","prompt":"Say hi"}`, "Say hi", true},
		{"prompt array of one", `{"prompt":["Say hi"]}`, "Say hi", true},
		{"prompt batch", `{"prompt":["a","b"]}`, "", false},
		{"token prompt", `{"prompt":[1,2,3]}`, "", false},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "", false},
		{"tool call turn", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[]}]}`, "", false},
		{"tool result turn", `{"messages":[{"role":"user","content":"x"},{"role":"tool","content":"r","tool_call_id":"1"}]}`, "", false},
		{"no user turn", `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":"a"}]}`, "", false},
		{"only a system prompt", `{"messages":[{"role":"system","content":"s"}]}`, "", false},
		{"blank text is still a user turn", `{"messages":[{"role":"user","content":"  "}]}`, "user:   ", true},
		{"too long", `{"messages":[{"role":"user","content":"` + long + `"}]}`, "", false},
		{"too long prompt", `{"prompt":"` + long + `"}`, "", false},
		{"not JSON", `{"messages":`, "", false},
		{"too deep", `{"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"prompt":"a"}`, "", false},
		{"neither", `{"input":"a"}`, "", false},
		{"repeated messages", `{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`, "", false},
		{"repeated prompt", `{"prompt":"a","prompt":"b"}`, "", false},
		{"repeated content", `{"messages":[{"role":"user","content":"a","content":"b"}]}`, "", false},
		{"repeated role", `{"messages":[{"role":"user","role":"system","content":"a"}]}`, "", false},
		{"both", `{"prompt":"a","messages":[]}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := EmbedText([]byte(tt.body))
			if ok != tt.ok || got != tt.want {
				t.Fatalf("EmbedText = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
