package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/tidwall/gjson"
)

// messagesGuarded says whether the pipeline runs hooks and guardrails for
// the Messages API (guardedOp in handlers/guardrails.go). With it set,
// this test passes (checked with the one-word change applied).
const messagesGuarded = false

// TestMessagesGuardrailDeny: a denying input guardrail answers 446 on
// /v1/messages, in Anthropic's error shape with the hook results beside
// it, before any provider call, for native and translated targets alike,
// streamed or not; a request that passes reaches the provider.
func TestMessagesGuardrailDeny(t *testing.T) {
	if !messagesGuarded {
		t.Skip("hooks do not run for /v1/messages until handlers/guardrails.go's guardedOp lists providers.OpMessages")
	}
	up := newFakeOpenAI(t)
	up.Hook = toolChat
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	const deny = `"input_guardrails":[{"default.regexMatch":{"rule":"(?i)secret","not":true},"deny":true}]`
	for name, target := range map[string]string{"native": anthropicTarget(ant), "translated": openAITarget(up, "gpt-4o-mini")} {
		t.Run(name, func(t *testing.T) {
			config := strings.Replace(target, `{`, `{`+deny+`,`, 1)
			for _, stream := range []string{"false", "true"} {
				before := len(ant.seen) + up.count()
				body := `{"model":"claude-sonnet-4-5","max_tokens":5,"stream":` + stream + `,"messages":[{"role":"user","content":"tell me the SECRET"}]}`
				resp, raw := translatedDo(t, "POST", "/messages", []byte(body), configHeader(config)...)
				if resp.StatusCode != 446 {
					t.Fatalf("stream=%s: status %d: %s", stream, resp.StatusCode, raw)
				}
				if typ, msg := anthropicError(t, raw); typ == "" || msg == "" || !gjson.GetBytes(raw, "hook_results.before_request_hooks.0").Exists() {
					t.Fatalf("stream=%s: body %s", stream, raw)
				}
				if len(ant.seen)+up.count() != before {
					t.Fatalf("stream=%s: the provider was called", stream)
				}
			}
			client := messagesClient(configHeader(config)...)
			_, err := client.Messages.New(context.Background(), userText("claude-sonnet-4-5", "the secret"))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 446 {
				t.Fatalf("SDK error %v", err)
			}
			if _, err := client.Messages.New(context.Background(), userText("claude-sonnet-4-5", "Hello")); err != nil {
				t.Fatalf("a passing request failed: %v", err)
			}
		})
	}
}
