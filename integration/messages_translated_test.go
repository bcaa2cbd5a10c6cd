package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/tokenest"
)

// TestMessagesTranslatedOpenAI sends the Messages API, through the
// official SDK, to an OpenAI-compatible target: the request becomes a
// chat completion (system prompt, image, tools, tool results) and the
// answer and stream become a Messages answer and Anthropic's events,
// usage and cost in the log line.
func TestMessagesTranslatedOpenAI(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = toolChat
	loadProviderSite(t)
	client := messagesClient(configHeader(openAITarget(up, "gpt-4o-mini"))...)
	ctx := context.Background()

	var raw *http.Response
	msg, err := client.Messages.New(ctx, userText("claude-sonnet-4-5", "Hello"), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "seen user" || msg.StopReason != anthropic.StopReasonEndTurn || msg.Model != "gpt-4o-mini" ||
		msg.Usage.InputTokens != 32 || msg.Usage.CacheReadInputTokens != 8 || msg.Usage.OutputTokens != 10 || !strings.HasPrefix(msg.ID, "msg_") {
		t.Fatalf("answer %s", msg.RawJSON())
	}
	sent := up.last().Body
	if up.last().Path != "/v1/chat/completions" || gjson.GetBytes(sent, "messages.0.content").String() != "Hello" || gjson.GetBytes(sent, "max_tokens").Int() != 1024 {
		t.Fatalf("openai was sent %s %s", up.last().Path, sent)
	}
	line := logFor(t, raw)
	for _, want := range []string{`"endpoint":"messages"`, `"provider":"openai"`, `"model":"gpt-4o-mini"`, `"prompt_tokens":40`, `"cached_tokens":8`, `"cost_usd"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %s: %s", want, line)
		}
	}

	// Streamed: Anthropic's event sequence (the SDK does not surface
	// ping), usage in message_delta.
	st := client.Messages.NewStreaming(ctx, userText("claude-sonnet-4-5", "Hello"))
	var acc anthropic.Message
	var events []string
	for st.Next() {
		ev := st.Current()
		events = append(events, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	want := "message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(events, " ") != want || acc.Content[0].Text != "seen user" || acc.Usage.InputTokens != 32 || acc.Usage.OutputTokens != 10 {
		t.Fatalf("events %v, message %s", events, acc.RawJSON())
	}
	if !gjson.GetBytes(up.last().Body, "stream_options.include_usage").Bool() {
		t.Fatalf("usage not asked for: %s", up.last().Body)
	}

	// A system prompt, an image and a stop sequence.
	p := userText("claude-sonnet-4-5", "x")
	p.System = []anthropic.TextBlockParam{{Text: "You are terse."}}
	p.StopSequences = []string{"END"}
	p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(
		anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="), anthropic.NewTextBlock("What is this?"))}
	if msg, err = client.Messages.New(ctx, p); err != nil {
		t.Fatal(err)
	}
	sent = up.last().Body
	if msg.Content[0].Text != "seen system,user,image_url,text" || gjson.GetBytes(sent, "messages.0.content").String() != "You are terse." ||
		gjson.GetBytes(sent, "messages.1.content.0.image_url.url").String() != "data:image/png;base64,iVBORw0KGgo=" || gjson.GetBytes(sent, "stop.0").String() != "END" {
		t.Fatalf("answer %s to %s", msg.RawJSON(), sent)
	}

	toolRoundTrip(t, client, "claude-sonnet-4-5", "It is sunny in Paris.")
	if sent = up.last().Body; gjson.GetBytes(sent, "messages.2.role").String() != "tool" || gjson.GetBytes(sent, "messages.1.tool_calls.0.id").String() != "call_w1" {
		t.Fatalf("tool turn sent as %s", sent)
	}
}

// TestMessagesTranslatedGemini sends the Messages API to Gemini: the
// documented answer (a thought, text, two function calls) becomes a
// thinking block, a text block and two tool_use blocks, as JSON and as a
// stream.
func TestMessagesTranslatedGemini(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	loadProviderSite(t)
	client := messagesClient(configHeader(geminiTarget(up))...)
	ctx := context.Background()
	p := userText("gemini-2.5-flash", "Weather in Paris and Tokyo?")
	p.Tools = []anthropic.ToolUnionParam{messagesWeatherTool()}
	var raw *http.Response
	msg, err := client.Messages.New(ctx, p, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	types := []string{}
	for _, b := range msg.Content {
		types = append(types, b.Type)
	}
	if strings.Join(types, ",") != "thinking,text,tool_use,tool_use" || msg.Content[1].Text != "Checking both." || msg.StopReason != anthropic.StopReasonToolUse ||
		string(msg.Content[3].AsToolUse().Input) != `{"city":"Tokyo"}` {
		t.Fatalf("answer %s", msg.RawJSON())
	}
	if !strings.Contains(up.last().Path, "gemini-2.5-flash:generateContent") || !gjson.GetBytes(up.last().Body, "tools.0.functionDeclarations.0").Exists() {
		t.Fatalf("gemini was sent %s %s", up.last().Path, up.last().Body)
	}
	if line := logFor(t, raw); !strings.Contains(line, `"provider":"google"`) || !strings.Contains(line, `"prompt_tokens":120`) {
		t.Errorf("log line %s", line)
	}
	st := client.Messages.NewStreaming(ctx, p)
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil || acc.StopReason != anthropic.StopReasonToolUse || len(acc.Content) < 2 {
		t.Fatalf("stream err %v: %s", err, acc.RawJSON())
	}
}

// anthropicError reads an error answer in Anthropic's shape.
func anthropicError(t *testing.T, body []byte) (typ, msg string) {
	t.Helper()
	if gjson.GetBytes(body, "type").String() != "error" {
		t.Fatalf("not Anthropic's error shape: %s", body)
	}
	return gjson.GetBytes(body, "error.type").String(), gjson.GetBytes(body, "error.message").String()
}

// TestMessagesErrors: every error on /v1/messages, the gateway's own and
// the providers', is in Anthropic's shape with the right status, and the
// SDK reads it.
func TestMessagesErrors(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = toolChat
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	openai := configHeader(openAITarget(up, "gpt-4o-mini"))
	cases := []struct {
		name    string
		body    string
		headers []string
		status  int
		typ     string
		msg     string
	}{
		{"max_tokens required", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, openai, 400, "invalid_request_error", "max_tokens: Field required"},
		{"role", `{"model":"m","max_tokens":5,"messages":[{"role":"robot","content":"hi"}]}`, openai, 400, "invalid_request_error", "messages.0.role"},
		{"block type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"hologram"}]}]}`, openai, 400, "invalid_request_error", "messages.0.content.0.type"},
		{"not JSON", `{"model":`, openai, 400, "invalid_request_error", "JSON object"},
		{"server tool on a chat target", `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, openai, 400, "invalid_request_error", "web_search_20250305"},
		{"gateway key", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, append([]string{"x-gateway-api-key", "wrong"}, openai...), 401, "authentication_error", "invalid gateway API key"},
		{"provider key refused (translated)", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			configHeader(`{"provider":"openai","api_key":"sk-wrong","custom_host":"` + up.URL + `/v1"}`), 401, "authentication_error", "Incorrect API key provided"},
		{"provider error (native)", `{"model":"overloaded","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, configHeader(anthropicTarget(ant)), 529, "overloaded_error", "Overloaded"},
		{"no route", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil, 400, "invalid_request_error", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := translatedDo(t, "POST", "/messages", []byte(c.body), c.headers...)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			typ, msg := anthropicError(t, body)
			if typ != c.typ || !strings.Contains(msg, c.msg) {
				t.Fatalf("error %s %q, want %s containing %q", typ, msg, c.typ, c.msg)
			}
		})
	}
	// The SDK reads the gateway's error as Anthropic's.
	client := messagesClient(openai...)
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "m", MaxTokens: 5, Messages: []anthropic.MessageParam{{OfUser: &anthropic.UserMessageParam{}}}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" {
		t.Fatalf("err %v", err)
	}
}

// TestMessagesFallbackAcrossFormats: a fallback config whose first target
// (Anthropic, native) answers 529 overloaded goes on to an
// OpenAI-compatible target, which is sent the translated request; the
// client gets a Messages answer, and the log line both attempts.
func TestMessagesFallbackAcrossFormats(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = toolChat
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	config := `{"strategy":{"mode":"fallback"},"targets":[` +
		strings.Replace(anthropicTarget(ant), `{`, `{"override_params":{"model":"overloaded"},`, 1) + `,` + openAITarget(up, "gpt-4o-mini") + `]}`
	client := messagesClient(configHeader(config)...)
	for _, stream := range []bool{false, true} {
		var raw *http.Response
		var msg anthropic.Message
		if stream {
			st := client.Messages.NewStreaming(context.Background(), userText("claude-sonnet-4-5", "Hello"), option.WithResponseInto(&raw))
			for st.Next() {
				if err := msg.Accumulate(st.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			m, err := client.Messages.New(context.Background(), userText("claude-sonnet-4-5", "Hello"), option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			msg = *m
		}
		if msg.Content[0].Text != "seen user" || raw.Header.Get("X-Gateway-Provider") != "openai" {
			t.Fatalf("stream=%v: %s from %s", stream, msg.RawJSON(), raw.Header.Get("X-Gateway-Provider"))
		}
		line := logFor(t, raw)
		if !strings.Contains(line, `"provider":"anthropic","status":529`) || !strings.Contains(line, `"provider":"openai","status":200`) {
			t.Fatalf("stream=%v: attempts not logged: %s", stream, line)
		}
	}
}

// TestMessagesCutStream: a stream that breaks off after its first byte
// ends with Anthropic's error event, from a translated target and from a
// native one.
func TestMessagesCutStream(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"))
		w.(http.Flusher).Flush()
		// Break the connection: no [DONE].
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return true
	}
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"cut"}]}`)
	for name, target := range map[string]string{"translated": openAITarget(up, "gpt-4o-mini"), "native": anthropicTarget(ant)} {
		t.Run(name, func(t *testing.T) {
			resp, raw := translatedDo(t, "POST", "/messages", body, configHeader(target)...)
			out := string(raw)
			if resp.StatusCode != 200 || !strings.HasPrefix(out, "event: message_start\n") || !strings.Contains(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"") ||
				strings.Contains(out, "message_stop") || !strings.HasSuffix(out, "\n\n") {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			// The client's SDK reports it as an error.
			client := messagesClient(configHeader(target)...)
			st := client.Messages.NewStreaming(context.Background(), userText("claude-sonnet-4-5", "cut"))
			for st.Next() {
			}
			if st.Err() == nil {
				t.Fatal("the SDK saw a complete stream")
			}
		})
	}
}

// TestMessagesCountTokens: count_tokens is asked of Anthropic targets and
// counted by the gateway, marked as an estimate, for the others.
func TestMessagesCountTokens(t *testing.T) {
	up := newFakeOpenAI(t)
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	params := anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-4-5",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are terse.")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("count these words ", 50)))},
	}
	var raw *http.Response
	native := messagesClient(configHeader(anthropicTarget(ant))...)
	n, err := native.Messages.CountTokens(context.Background(), params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != 101 || raw.Header.Get("X-Gateway-Token-Estimate") != "" || ant.last().Path != "/v1/messages/count_tokens" {
		t.Fatalf("native count %d, estimate header %q, path %s", n.InputTokens, raw.Header.Get("X-Gateway-Token-Estimate"), ant.last().Path)
	}
	before := up.count()
	translated := messagesClient(configHeader(openAITarget(up, "gpt-4o-mini"))...)
	n, err = translated.Messages.CountTokens(context.Background(), params, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	// OpenAI's tokenizer: 3 + 3 per message + the role + the texts.
	want := 3 + 3 + 1 + tokenest.CountString("You are terse.", tokenest.O200k) + tokenest.CountString(strings.Repeat("count these words ", 50), tokenest.O200k)
	if n.InputTokens != want || raw.Header.Get("X-Gateway-Token-Estimate") != "true" || up.count() != before {
		t.Fatalf("estimate %d, header %q, provider called %d times", n.InputTokens, raw.Header.Get("X-Gateway-Token-Estimate"), up.count()-before)
	}
	// Bounds apply to count_tokens too.
	resp, body := translatedDo(t, "POST", "/messages/count_tokens", []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"x"}]}]}`), configHeader(openAITarget(up, "m"))...)
	if typ, _ := anthropicError(t, body); resp.StatusCode != 400 || typ != "invalid_request_error" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
