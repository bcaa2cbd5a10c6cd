package responses

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func summarize(items []Item) string {
	var out []string
	for _, it := range items {
		g := gjson.ParseBytes(it)
		switch g.Get("type").Str {
		case "function_call":
			out = append(out, "call")
		case "function_call_output":
			out = append(out, "out")
		case "reasoning":
			out = append(out, "rs")
		default:
			out = append(out, g.Get("role").Str[:1]+g.Get("content.0.text").Str)
		}
	}
	return strings.Join(out, " ")
}

func items(spec string) []Item {
	var out []Item
	for _, f := range strings.Fields(spec) {
		switch {
		case f == "call":
			out = append(out, Item(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`))
		case f == "out":
			out = append(out, Item(`{"type":"function_call_output","call_id":"c","output":"o"}`))
		default:
			role := map[byte]string{'u': "user", 'a': "assistant", 's': "system", 'd': "developer"}[f[0]]
			out = append(out, Item(`{"type":"message","role":"`+role+`","content":[{"type":"input_text","text":"`+f[1:]+`"}]}`))
		}
	}
	return out
}

func TestDropOldest(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"u1", "u1", false},
		{"u1 a1 u2", "u2", true},
		{"u1 a1 u2 a2 u3 a3 u4", "u3 a3 u4", true},
		// The cut never leaves a tool output without its call.
		{"u1 call out a1 u2 call out a2 u3", "u2 call out a2 u3", true},
		{"u1 call out call out a1 u2", "u2", true},
		// System and developer messages stay.
		{"s0 u1 a1 u2 a2 u3", "s0 u2 a2 u3", true},
		{"d0 u1 a1 u2", "d0 u2", true},
		{"s0 u1", "s0 u1", false},
		// Everything after the last user turn is kept.
		{"u1 a1 u2 call out", "u2 call out", true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, ok := DropOldest(items(c.in))
			if ok != c.ok || summarize(got) != c.want {
				t.Fatalf("DropOldest(%s) = %s, %v; want %s, %v", c.in, summarize(got), ok, c.want, c.ok)
			}
		})
	}
}

func TestIsContextOverflow(t *testing.T) {
	env := func(msg, code string) []byte {
		c := "null"
		if code != "" {
			c = `"` + code + `"`
		}
		return []byte(`{"error":{"message":"` + msg + `","type":"invalid_request_error","param":null,"code":` + c + `}}`)
	}
	cases := []struct {
		name   string
		status int
		body   []byte
		want   bool
	}{
		{"openai code", 400, env("This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", "context_length_exceeded"), true},
		{"openai responses", 400, env("Your input exceeds the context window of this model. Please adjust your input and try again.", ""), true},
		{"anthropic", 400, env("prompt is too long: 215000 tokens > 200000 maximum", ""), true},
		{"anthropic max_tokens", 400, env("input length and `max_tokens` exceed context limit: 199000 + 4096 > 200000, decrease input length or `max_tokens` and try again", ""), true},
		{"bedrock", 400, env("Input is too long for requested model.", ""), true},
		{"bedrock converse", 400, env("The model returned the following errors: too many input tokens", ""), true},
		{"gemini", 400, env("The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).", ""), true},
		{"cohere", 400, env("too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4292", ""), true},
		{"mistral", 400, env("Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length", ""), true},
		{"413", 413, env("Input is too long for requested model.", ""), true},
		{"plain string error", 400, []byte(`{"error":"prompt is too long"}`), true},
		{"other 400", 400, env("Invalid 'temperature'", ""), false},
		{"rate limit", 429, env("too many tokens per minute", ""), false},
		{"server error", 500, env("maximum context length", ""), false},
		{"garbage", 400, []byte(`not json`), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := IsContextOverflow(c.status, c.body); got != c.want {
				t.Fatalf("IsContextOverflow = %v", got)
			}
		})
	}
}

func TestOverflowError(t *testing.T) {
	e := OverflowError()
	if e.Status != http.StatusBadRequest || e.Code != "context_length_exceeded" || !strings.Contains(e.Message, "context window") {
		t.Fatalf("%+v", e)
	}
}
