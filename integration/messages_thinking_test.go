package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/tidwall/gjson"
)

// reasoningChat is an OpenAI-compatible server of a reasoning model
// (DeepSeek's format): the answer's reasoning in message.reasoning_content.
func reasoningChat(t testing.TB) *fakeServer {
	return newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test-provider" {
			writeJSON(w, 401, []byte(`{"error":{"message":"Authentication Fails","type":"authentication_error"}}`))
			return
		}
		writeJSON(w, 200, []byte(fmt.Sprintf(`{"id":"r1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"The user greets me.","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
			gjson.GetBytes(body, "model").String())))
	})
}

// TestMessagesThinkingAcrossTargets: a translated reasoning model's
// answer has a thinking block with an empty signature; a client that
// keeps the conversation (as Claude Code does) and sends the next turn
// to Anthropic is not refused for it: the gateway leaves the unsigned
// block out, and keeps a signed one.
func TestMessagesThinkingAcrossTargets(t *testing.T) {
	ds := reasoningChat(t)
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	ctx := context.Background()
	translated := messagesClient(configHeader(fmt.Sprintf(`{"provider":"openai","api_key":"sk-test-provider","custom_host":%q}`, ds.URL+"/v1"))...)
	p := userText("deepseek-reasoner", "Hi")
	first, err := translated.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Content) != 2 || first.Content[0].Type != "thinking" || first.Content[0].Thinking != "The user greets me." || first.Content[0].Signature != "" || first.Content[1].Text != "Hello!" {
		t.Fatalf("translated answer %s", first.RawJSON())
	}

	native := messagesClient(configHeader(anthropicTarget(ant))...)
	next := userText("claude-sonnet-4-5", "Hi")
	next.Messages = append(next.Messages, first.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And now?")))
	if _, err := native.Messages.New(ctx, next); err != nil {
		t.Fatalf("the native turn after a translated one: %v", err)
	}
	sent := ant.last().Body
	if n := gjson.GetBytes(sent, "messages.1.content.#").Int(); n != 1 || gjson.GetBytes(sent, "messages.1.content.0.text").Str != "Hello!" || gjson.GetBytes(sent, "messages.2.content.0.text").Str != "And now?" {
		t.Fatalf("anthropic was sent %s", sent)
	}

	// A block Anthropic signed goes back as it is.
	signed := userText("claude-sonnet-4-5", "Hi")
	signed.Messages = append(signed.Messages, anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCgIYAhIM", "Greeting."), anthropic.NewTextBlock("Hello!")),
		anthropic.NewUserMessage(anthropic.NewTextBlock("And now?")))
	if _, err := native.Messages.New(ctx, signed); err != nil {
		t.Fatal(err)
	}
	if sig := gjson.GetBytes(ant.last().Body, "messages.1.content.0.signature").Str; sig != "EqQBCgIYAhIM" {
		t.Fatalf("the signed block was not sent: %s", ant.last().Body)
	}
}
