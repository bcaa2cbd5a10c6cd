package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"
)

// messagesAnthropic is the Anthropic fake of the Messages tests: the
// conversation-reading answers of responsesAnthropic (text "seen N
// messages", a get_weather call on "weather", the weather after a
// tool_result), plus count_tokens, a 529 for the model "overloaded", a
// stream that breaks off after its first block for "cut", and Anthropic's
// 400 for a thinking block without a valid signature.
func messagesAnthropic(t testing.TB) *fakeServer {
	inner := responsesAnthropic(t)
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch {
		case r.Header.Get("x-api-key") != anthropicKey:
			writeJSON(w, 401, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
		case unsignedThinking(body):
			// Anthropic checks every thinking block's signature.
			writeJSON(w, 400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: Invalid `+"`signature`"+` in `+"`thinking`"+` block"}}`))
		case r.URL.Path == "/v1/messages/count_tokens":
			writeJSON(w, 200, []byte(`{"input_tokens":`+itoa(len(gjson.GetBytes(body, "messages").Array())*100+1)+`}`))
		case gjson.GetBytes(body, "model").String() == "overloaded":
			writeJSON(w, 529, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		case strings.Contains(string(body), "cut") && gjson.GetBytes(body, "stream").Bool():
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_c\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"))
			// The connection ends here, without message_stop.
		default:
			req, _ := http.NewRequest(r.Method, inner.URL+r.URL.Path, strings.NewReader(string(body)))
			req.Header = r.Header.Clone()
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				writeJSON(w, 500, []byte(`{"type":"error","error":{"type":"api_error","message":"fake"}}`))
				return
			}
			defer resp.Body.Close()
			w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
			w.WriteHeader(resp.StatusCode)
			buf := make([]byte, 4096)
			for {
				n, err := resp.Body.Read(buf)
				w.Write(buf[:n])
				w.(http.Flusher).Flush()
				if err != nil {
					return
				}
			}
		}
	})
}

// nativeTarget names a native target kind's config and the answers its
// fake gives to the shared conversation of TestMessagesNative.
type nativeTarget struct {
	name, model, config string
	// wantText is the answer to a one-turn "Hello".
	wantText string
	// seen returns what the provider was sent last.
	seen func() seenRequest
}

// TestMessagesNative sends the Messages API, through the official SDK, to
// the targets that speak it (Anthropic, Claude on Bedrock): text, stream,
// a system prompt, an image, and a tool round trip plain and streamed.
// The provider receives the client's body with only the changes its API
// needs, and the log line has the model, usage (cache reads included)
// and cost.
func TestMessagesNative(t *testing.T) {
	ant := messagesAnthropic(t)
	bed := newFakeBedrockClaude(t)
	loadProviderSite(t)
	targets := []nativeTarget{
		{"anthropic", "claude-sonnet-4-5", anthropicTarget(ant), "seen 1 messages", ant.last},
		{"bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", bedrockTarget(bed), "Bonjour from Bedrock", bed.last},
	}
	ctx := context.Background()
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			client := messagesClient(configHeader(tg.config)...)
			var raw *http.Response
			msg, err := client.Messages.New(ctx, userText(tg.model, "Hello"), option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			if msg.Content[0].Text != tg.wantText || msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.InputTokens != 21 || msg.Usage.CacheReadInputTokens != 4 {
				t.Fatalf("answer %s", msg.RawJSON())
			}
			seen := tg.seen()
			switch tg.name {
			case "anthropic":
				if seen.Path != "/v1/messages" || seen.Header.Get("anthropic-version") == "" || seen.Header.Get("x-api-key") != anthropicKey || gjson.GetBytes(seen.Body, "model").String() != tg.model || gjson.GetBytes(seen.Body, "anthropic_version").Exists() {
					t.Fatalf("anthropic was sent %s %v %s", seen.Path, seen.Header, seen.Body)
				}
			case "bedrock":
				if seen.Path != "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke" || gjson.GetBytes(seen.Body, "messages.0.content.0.text").String() != "Hello" {
					t.Fatalf("bedrock was sent %s %s", seen.Path, seen.Body)
				}
			}
			line := logFor(t, raw)
			for _, want := range []string{`"endpoint":"messages"`, `"provider":"` + tg.name + `"`, `"model":"` + tg.model + `"`, `"prompt_tokens":25`, `"completion_tokens":7`, `"cached_tokens":4`} {
				if !strings.Contains(line, want) {
					t.Errorf("log line lacks %s: %s", want, line)
				}
			}
			if tg.name == "anthropic" && !strings.Contains(line, `"cost_usd"`) {
				t.Errorf("no cost in %s", line)
			}

			// Streamed.
			st := client.Messages.NewStreaming(ctx, userText(tg.model, "Hello"))
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
			if acc.Content[0].Text != tg.wantText || acc.Usage.OutputTokens != 7 || events[0] != "message_start" || events[len(events)-1] != "message_stop" {
				t.Fatalf("stream %v gave %s", events, acc.RawJSON())
			}
			if tg.name == "bedrock" && !strings.HasSuffix(tg.seen().Path, "/invoke-with-response-stream") {
				t.Fatalf("bedrock stream went to %s", tg.seen().Path)
			}

			// A system prompt and an image reach the provider as sent.
			p := userText(tg.model, "x")
			p.System = []anthropic.TextBlockParam{{Text: "You are terse."}}
			p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(
				anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo="), anthropic.NewTextBlock("What is this?"))}
			if _, err := client.Messages.New(ctx, p); err != nil {
				t.Fatal(err)
			}
			sent := tg.seen().Body
			if gjson.GetBytes(sent, "system.0.text").String() != "You are terse." || gjson.GetBytes(sent, "messages.0.content.0.source.data").String() != "iVBORw0KGgo=" {
				t.Fatalf("sent %s", sent)
			}

			toolRoundTrip(t, client, tg.model, "It is sunny in Paris.")
		})
	}
}

// toolRoundTrip asks for the weather, gets a get_weather call (plain and
// streamed, the streamed input arriving as input_json_delta), sends the
// tool's result and checks the final answer.
func toolRoundTrip(t *testing.T, client anthropic.Client, model, wantAnswer string) {
	t.Helper()
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		p := userText(model, "What is the weather in Paris?")
		p.Tools = []anthropic.ToolUnionParam{messagesWeatherTool()}
		var call anthropic.Message
		if stream {
			st := client.Messages.NewStreaming(ctx, p)
			partial := false
			for st.Next() {
				ev := st.Current()
				if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
					partial = true
				}
				if err := call.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Err(); err != nil || !partial {
				t.Fatalf("stream err %v, input_json_delta seen %v", err, partial)
			}
		} else {
			m, err := client.Messages.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			call = *m
		}
		var use *anthropic.ToolUseBlock
		for _, b := range call.Content {
			if b.Type == "tool_use" {
				u := b.AsToolUse()
				use = &u
			}
		}
		if call.StopReason != anthropic.StopReasonToolUse || use == nil || use.Name != "get_weather" {
			t.Fatalf("stream=%v: no tool call in %s", stream, call.RawJSON())
		}
		var in struct{ City string }
		if err := json.Unmarshal(use.Input, &in); err != nil || in.City != "Paris" {
			t.Fatalf("stream=%v: input %s", stream, use.Input)
		}
		p.Messages = append(p.Messages, call.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"city":"Paris","sky":"clear"}`, false)))
		final, err := client.Messages.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if final.Content[0].Text != wantAnswer {
			t.Fatalf("stream=%v: final %s", stream, final.RawJSON())
		}
	}
}

// TestMessagesNativeVertex sends the Messages API to Claude on Vertex AI:
// rawPredict and streamRawPredict with the model in the URL and Vertex's
// anthropic_version in the body; the answers are Anthropic's documented
// examples (thinking, text, two tool calls; cache writes and reads).
func TestMessagesNativeVertex(t *testing.T) {
	up := fakeGemini(t, geminiFixtures(t))
	loadProviderSite(t)
	client := messagesClient(configHeader(vertexTarget(up))...)
	ctx := context.Background()
	p := userText("claude-sonnet-4-5@20250929", "Weather in Paris and Tokyo?")
	p.Tools = []anthropic.ToolUnionParam{messagesWeatherTool()}
	var raw *http.Response
	msg, err := client.Messages.New(ctx, p, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 4 || msg.Content[0].Type != "thinking" || msg.Content[3].AsToolUse().Name != "get_weather" || msg.Usage.CacheCreationInputTokens != 20 {
		t.Fatalf("answer %s", msg.RawJSON())
	}
	seen := up.last()
	if seen.Path != "/v1/projects/msg-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict" ||
		gjson.GetBytes(seen.Body, "anthropic_version").String() != "vertex-2023-10-16" || gjson.GetBytes(seen.Body, "model").Exists() ||
		gjson.GetBytes(seen.Body, "tools.0.name").String() != "get_weather" {
		t.Fatalf("vertex was sent %s %s", seen.Path, seen.Body)
	}
	line := logFor(t, raw)
	for _, want := range []string{`"provider":"vertex-ai"`, `"prompt_tokens":1320`, `"completion_tokens":90`, `"cached_tokens":1000`, `"cache_write_tokens":20`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %s: %s", want, line)
		}
	}
	st := client.Messages.NewStreaming(ctx, p)
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil || acc.StopReason != anthropic.StopReasonToolUse || !strings.HasSuffix(up.last().Path, ":streamRawPredict") {
		t.Fatalf("stream err %v: %s via %s", err, acc.RawJSON(), up.last().Path)
	}
}

// unsignedThinking reports whether a Messages body carries a thinking
// block with an empty signature, which Anthropic refuses.
func unsignedThinking(body []byte) bool {
	found := false
	gjson.GetBytes(body, "messages.#.content").ForEach(func(_, c gjson.Result) bool {
		c.ForEach(func(_, b gjson.Result) bool {
			if b.Get("type").Str == "thinking" && b.Get("signature").Str == "" {
				found = true
			}
			return !found
		})
		return !found
	})
	return found
}
