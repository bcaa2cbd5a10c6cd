package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// weatherTool is the function tool the provider tests offer.
func weatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("Current weather for a city"),
		Parameters: openai.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required":   []string{"city"},
		},
	})
}

// toolTurnParams is a conversation with an image, a tool call and its
// result, the shapes that need translating.
func toolTurnParams(model string) openai.ChatCompletionNewParams {
	assistant := openai.ChatCompletionAssistantMessageParam{
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       "call_0",
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`},
			},
		}},
	}
	return openai.ChatCompletionNewParams{
		Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a weather assistant."),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is this and what's the weather in Paris and Tokyo?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64,iVBORw0KGgo="}),
			}),
			{OfAssistant: &assistant},
			openai.ToolMessage("18C", "call_0"),
		},
		Tools:     []openai.ChatCompletionToolUnionParam{weatherTool()},
		MaxTokens: openai.Int(256),
	}
}

func anthropicClient(up *fakeServer, headers ...string) openai.Client {
	return translatedClient(append([]string{"x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL}, headers...)...)
}

func TestAnthropicChat(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_tools.json"), nil)
	loadProviderSite(t)
	client := anthropicClient(up)
	resp, err := client.Chat.Completions.New(context.Background(), toolTurnParams("claude-sonnet-4-5"))
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	if m.Content != "I'll check both cities." || len(m.ToolCalls) != 2 || m.ToolCalls[1].Function.Arguments != `{"city": "Tokyo", "unit": "celsius"}` {
		t.Fatalf("message = %+v", m)
	}
	if resp.Choices[0].FinishReason != "tool_calls" || resp.Usage.PromptTokens != 1320 || resp.Usage.PromptTokensDetails.CachedTokens != 1000 || resp.Usage.TotalTokens != 1410 {
		t.Fatalf("finish %s usage %+v", resp.Choices[0].FinishReason, resp.Usage)
	}
	if !strings.Contains(m.RawJSON(), `"reasoning_content":"I should look up both cities."`) || !strings.Contains(m.RawJSON(), `"signature":"WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve"`) {
		t.Fatalf("thinking not in message: %s", m.RawJSON())
	}

	seen := up.last()
	if seen.Header.Get("anthropic-version") != "2023-06-01" || seen.Header.Get("Authorization") != "" {
		t.Fatalf("upstream headers %v", seen.Header)
	}
	b := gjson.ParseBytes(seen.Body)
	checks := map[string]string{
		"system.0.text":                          "You are a weather assistant.",
		"messages.0.content.1.source.type":       "base64",
		"messages.1.content.0.type":              "tool_use",
		"messages.1.content.0.input.city":        "Paris",
		"messages.2.content.0.type":              "tool_result",
		"messages.2.content.0.tool_use_id":       "call_0",
		"max_tokens":                             "256",
		"tools.0.input_schema.required.0":        "city",
		"messages.0.content.1.source.media_type": "image/png",
	}
	for path, want := range checks {
		if got := b.Get(path).String(); got != want {
			t.Errorf("upstream %s = %q, want %q\n%s", path, got, want, seen.Body)
		}
	}
}

func TestAnthropicStream(t *testing.T) {
	up := fakeAnthropic(t, nil, fixture(t, "anthropic", "stream_tools.sse"))
	loadProviderSite(t)
	client := anthropicClient(up)
	for _, include := range []bool{true, false} {
		params := toolTurnParams("claude-sonnet-4-5")
		if include {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := client.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		var last openai.ChatCompletionChunk
		chunks := 0
		for stream.Next() {
			last = stream.Current()
			if !acc.AddChunk(last) {
				t.Fatalf("accumulator rejected %s", last.RawJSON())
			}
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		m := acc.Choices[0].Message
		if m.Content != "Okay, let me check the weather.\n" || len(m.ToolCalls) != 2 ||
			m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || m.ToolCalls[1].ID != "toolu_01B2" ||
			acc.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("accumulated %+v", acc.Choices[0])
		}
		if include {
			if len(last.Choices) != 0 || last.Usage.PromptTokens != 572 || last.Usage.CompletionTokens != 89 || last.Usage.PromptTokensDetails.CachedTokens != 100 {
				t.Fatalf("last chunk %s", last.RawJSON())
			}
		} else if last.JSON.Usage.Valid() && last.Usage.TotalTokens != 0 {
			t.Fatalf("usage chunk sent without include_usage: %s", last.RawJSON())
		}
		if !gjson.GetBytes(up.last().Body, "stream").Bool() {
			t.Fatal("upstream not asked to stream")
		}
	}
	// The gateway still accounted the usage of the stream without it.
	lines := gatewayLogLines(t)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"prompt_tokens":572`) {
		t.Fatalf("usage not logged: %v", lines)
	}
}

func TestAnthropicStreamError(t *testing.T) {
	up := fakeAnthropic(t, nil, fixture(t, "anthropic", "stream_error.sse"))
	loadProviderSite(t)
	client := anthropicClient(up)
	stream := client.Chat.Completions.NewStreaming(context.Background(), toolTurnParams("claude-sonnet-4-5"))
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	err := stream.Err()
	if err == nil || !strings.Contains(err.Error(), "Overloaded") || text.String() != "Hel" {
		t.Fatalf("err = %v, text %q", err, text.String())
	}
}

func TestAnthropicErrors(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadProviderSite(t)
	cases := []struct {
		name    string
		model   string
		key     string
		status  int
		message string
		typ     string
	}{
		{"wrong key", "claude-sonnet-4-5", "sk-wrong", 401, "invalid x-api-key", "authentication_error"},
		{"unknown model", "claude-unknown", anthropicKey, 404, "model: claude-unknown", "not_found_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := anthropicClient(up)
			_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    tc.model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			}, option.WithAPIKey(tc.key))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Message != tc.message || apiErr.Type != tc.typ {
				t.Fatalf("err = %v", err)
			}
		})
	}
	resp, body := translatedDo(t, http.MethodPost, "/completions", []byte(`{"model":"claude-sonnet-4-5","prompt":"hi"}`),
		"x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL, "Authorization", "Bearer "+anthropicKey)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "/v1/completions") {
		t.Fatalf("completions: %d %s", resp.StatusCode, body)
	}
	resp, body = translatedDo(t, http.MethodPost, "/chat/completions", []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`),
		"x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL)
	if resp.StatusCode != 401 || !strings.Contains(string(body), "missing_provider_key") {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
}

// TestAnthropicThinkingRoundTrip sends back an assistant turn with the
// content_blocks (thinking and signature) a previous answer returned,
// plus the client's anthropic-version and anthropic-beta headers.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadProviderSite(t)
	client := anthropicClient(up)
	first, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "claude-sonnet-4-5",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil || first.Choices[0].Message.Content != "Hi! My name is Claude." {
		t.Fatalf("first turn: %v", err)
	}
	body := `{"model":"claude-sonnet-4-5","thinking":{"type":"enabled","budget_tokens":2048},"messages":[
		{"role":"user","content":"Weather?"},
		{"role":"assistant","content":"Checking.","content_blocks":[{"type":"thinking","thinking":"Use the tool.","signature":"sig-abc"},{"type":"text","text":"Checking."}],
		 "tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"toolu_1","content":"18C"}]}`
	resp, out := translatedDo(t, http.MethodPost, "/chat/completions", []byte(body),
		"x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL, "Authorization", "Bearer "+anthropicKey,
		"anthropic-version", "2024-01-01", "anthropic-beta", "interleaved-thinking-2025-05-14")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	seen := up.last()
	var sent struct {
		Thinking struct {
			BudgetTokens int `json:"budget_tokens"`
		} `json:"thinking"`
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(seen.Body, &sent); err != nil {
		t.Fatal(err)
	}
	blocks := sent.Messages[1].Content
	if sent.Thinking.BudgetTokens != 2048 || blocks[0]["type"] != "thinking" || blocks[0]["signature"] != "sig-abc" || blocks[2]["type"] != "tool_use" {
		t.Fatalf("upstream body %s", seen.Body)
	}
	if seen.Header.Get("anthropic-version") != "2024-01-01" || seen.Header.Get("anthropic-beta") != "interleaved-thinking-2025-05-14" {
		t.Fatalf("headers %v", seen.Header)
	}
}

// TestAnthropicDroppedFieldsLogged: fields Anthropic has no place for are
// left out of the upstream request and named in a debug log line.
func TestAnthropicDroppedFieldsLogged(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadProviderSite(t)
	body := `{"model":"claude-sonnet-4-5","seed":7,"logit_bias":{"1":2},"temperature":0.5,"messages":[{"role":"user","content":"hi"}]}`
	resp, out := translatedDo(t, http.MethodPost, "/chat/completions", []byte(body),
		"x-gateway-provider", "anthropic", "x-gateway-custom-host", up.URL, "Authorization", "Bearer "+anthropicKey, "x-gateway-trace-id", "dropped-1")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if sent := string(up.last().Body); strings.Contains(sent, "seed") || strings.Contains(sent, "logit_bias") || !strings.Contains(sent, `"temperature":0.5`) {
		t.Fatalf("upstream body: %s", sent)
	}
	var line string
	for _, l := range strings.Split(readLog(t), "\n") {
		if strings.Contains(l, "were dropped") && strings.Contains(l, `"dropped-1"`) {
			line = l
		}
	}
	if !strings.Contains(line, `"fields":["seed","logit_bias"]`) && !strings.Contains(line, `"fields":["logit_bias","seed"]`) {
		t.Fatalf("no debug line naming the dropped fields: %q", line)
	}
}
