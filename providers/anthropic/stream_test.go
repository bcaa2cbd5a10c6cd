package anthropic

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers/internal/goldentest"
)

func TestStreamGolden(t *testing.T) {
	cases := []struct {
		name         string
		includeUsage bool
		wantErr      bool
		usage        *providers.Usage
	}{
		{"stream_tools", true, false, &providers.Usage{PromptTokens: 572, CompletionTokens: 89, TotalTokens: 661, CachedTokens: 100}},
		{"stream_error", false, true, &providers.Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}},
		{"stream_truncated", false, true, &providers.Usage{PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}},
	}
	for _, tc := range cases {
		in := goldentest.Read(t, "testdata/"+tc.name+".sse")
		body := `{"model":"claude","stream":true}`
		if tc.includeUsage {
			body = `{"model":"claude","stream":true,"stream_options":{"include_usage":true}}`
		}
		c := &providers.Call{Op: providers.OpChat, Model: "claude", Stream: true, Body: []byte(body)}
		var first []byte
		// Every split must give the same output as one write.
		for _, split := range []int{0, 1, 2, 3, 7, 64, 333} {
			out, u, err := goldentest.RunStream(Chat{Provider: Slug}, c, in, split)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s split %d: err = %v", tc.name, split, err)
			}
			if *u != *tc.usage {
				t.Fatalf("%s split %d: usage = %+v", tc.name, split, *u)
			}
			if first == nil {
				first = out
				goldentest.SSE(t, out, "testdata/"+tc.name+".openai.sse")
			} else if !bytes.Equal(stripCreated(out), stripCreated(first)) {
				t.Fatalf("%s split %d differs:\n%s\n---\n%s", tc.name, split, out, first)
			}
		}
	}
}

// stripCreated returns b's events with their "created" times blanked:
// each run stamps the wall clock, so two runs a second apart differ there
// and nowhere else.
func stripCreated(b []byte) []byte {
	return createdField.ReplaceAll([]byte(strings.Join(goldentest.Events(b), "\n")), []byte(`"created":0`))
}

var createdField = regexp.MustCompile(`"created":[0-9]+`)

// TestStreamAccumulates checks the chunks with the OpenAI SDK's own
// accumulator: tool calls indexed 0, 1 whatever Anthropic's block index.
func TestStreamAccumulates(t *testing.T) {
	c := &providers.Call{Op: providers.OpChat, Model: "claude", Stream: true, Body: []byte(`{"stream_options":{"include_usage":true}}`)}
	out, _, err := goldentest.RunStream(Chat{Provider: Slug}, c, goldentest.Read(t, "testdata/stream_tools.sse"), 5)
	if err != nil {
		t.Fatal(err)
	}
	acc := goldentest.Accumulate(t, out)
	m := acc.Choices[0].Message
	if m.Content != "Okay, let me check the weather.\n" {
		t.Errorf("content = %q", m.Content)
	}
	if len(m.ToolCalls) != 2 || m.ToolCalls[0].ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" ||
		m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || m.ToolCalls[1].Function.Arguments != `{"city": "Tokyo"}` {
		t.Errorf("tool calls = %+v", m.ToolCalls)
	}
	if acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.PromptTokens != 572 || acc.Usage.PromptTokensDetails.CachedTokens != 100 {
		t.Errorf("finish %q usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
}

func TestStreamEvents(t *testing.T) {
	cases := []struct {
		name   string
		events string
		want   []string // substrings expected in order
	}{
		{
			name:   "no message_start still has an id",
			events: "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n",
			want:   []string{`"role":"assistant","content":"x"`, `"finish_reason":"stop"`, "[DONE]"},
		},
		{
			name:   "malformed event",
			events: "data: {not json\n\n",
			want:   []string{`"error":{"message":"anthropic sent a malformed stream event"`},
		},
		{
			name:   "refusal",
			events: "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\"},\"usage\":{\"output_tokens\":3}}\n\ndata: {\"type\":\"message_stop\"}\n\n",
			want:   []string{`"finish_reason":"content_filter"`, "[DONE]"},
		},
		{
			name:   "redacted thinking",
			events: "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"abc\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n",
			want:   []string{`"content_blocks":[{"index":0,"type":"redacted_thinking","data":"abc"}]`},
		},
		{
			name:   "delta for unknown block ignored",
			events: "data: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n",
			want:   []string{`"finish_reason":"stop"`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &providers.Call{Model: "claude", Stream: true}
			out, _, _ := goldentest.RunStream(Chat{Provider: Slug}, c, []byte(tc.events), 0)
			s := string(out)
			for _, w := range tc.want {
				i := strings.Index(s, w)
				if i < 0 {
					t.Fatalf("missing %s in\n%s", w, out)
				}
				s = s[i+len(w):]
			}
			if strings.Contains(string(out), "tool_calls") {
				t.Fatalf("unexpected tool call in\n%s", out)
			}
		})
	}
}

func TestStreamUsageCumulative(t *testing.T) {
	in := "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":50,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n" +
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":0,\"output_tokens\":12}}\n\n" +
		"data: {\"type\":\"message_stop\"}\n\n"
	_, u, err := goldentest.RunStream(Chat{Provider: Slug}, &providers.Call{Stream: true}, []byte(in), 0)
	want := providers.Usage{PromptTokens: 57, CompletionTokens: 12, TotalTokens: 69, CachedTokens: 7}
	if err != nil || *u != want {
		t.Fatalf("usage %+v err %v", u, err)
	}
}
