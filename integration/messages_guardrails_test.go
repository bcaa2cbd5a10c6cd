package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/tidwall/gjson"
)

// TestMessagesGuardrailDeny: a denying input guardrail answers 446 on
// /v1/messages, in Anthropic's error shape with the hook results beside
// it, before any provider call, for native and translated targets alike,
// streamed or not; a request that passes reaches the provider.
func TestMessagesGuardrailDeny(t *testing.T) {
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

// TestMessagesOutputGuardrailStream: an output guardrail that can deny
// holds a native Messages stream until its verdict: a passing answer
// reaches the SDK as a well-formed Anthropic stream (no extra event), a
// failing one is a 446 in Anthropic's shape.
func TestMessagesOutputGuardrailStream(t *testing.T) {
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	for _, tc := range []struct {
		name   string
		rule   string
		status int
	}{
		{"passes", `(?i)never-in-the-answer`, http.StatusOK},
		{"denied", `.`, 446},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := strings.Replace(anthropicTarget(ant), `{`, `{"output_guardrails":[{"default.regexMatch":{"rule":"`+tc.rule+`","not":true},"deny":true}],`, 1)
			if tc.status != http.StatusOK {
				body := `{"model":"claude-sonnet-4-5","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"Hello"}]}`
				resp, raw := translatedDo(t, "POST", "/messages", []byte(body), configHeader(config)...)
				if typ, _ := anthropicError(t, raw); resp.StatusCode != tc.status || typ == "" {
					t.Fatalf("status %d: %s", resp.StatusCode, raw)
				}
				return
			}
			client := messagesClient(configHeader(config)...)
			stream := client.Messages.NewStreaming(context.Background(), userText("claude-sonnet-4-5", "Hello"))
			var text strings.Builder
			events := 0
			for stream.Next() {
				events++
				ev := stream.Current()
				if ev.Type == "content_block_delta" {
					text.WriteString(ev.Delta.Text)
				}
			}
			if err := stream.Err(); err != nil || events == 0 || text.Len() == 0 {
				t.Fatalf("stream: %d events, text %q, err %v", events, text.String(), err)
			}
		})
	}
}

// TestMessagesCacheNative: a native Messages answer is cached like a chat
// completion (HIT on the same body, the provider called once), and a
// streamed call of the same body is served from it as Anthropic's events
// (TestMessagesCacheNativeStream stores streams).
func TestMessagesCacheNative(t *testing.T) {
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	config := strings.Replace(anthropicTarget(ant), `{`, `{"cache":{"mode":"simple"},`, 1)
	body := `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"cache me ` + t.Name() + `"}]}`
	var first []byte
	for i, want := range []string{"MISS", "HIT"} {
		before := len(ant.seen)
		resp, raw := translatedDo(t, "POST", "/messages", []byte(body), configHeader(config)...)
		if resp.StatusCode != 200 || resp.Header.Get("x-gateway-cache-status") != want {
			t.Fatalf("call %d: %d %q: %s", i, resp.StatusCode, resp.Header.Get("x-gateway-cache-status"), raw)
		}
		if called := len(ant.seen) - before; (want == "HIT") == (called != 0) {
			t.Fatalf("call %d (%s): provider called %d times", i, want, called)
		}
		if i == 0 {
			first = raw
		} else if string(raw) != string(first) {
			t.Fatalf("the hit differs from the answer:\n%s\n%s", first, raw)
		}
	}
	stream := strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
	before := len(ant.seen)
	resp, raw := translatedDo(t, "POST", "/messages", []byte(stream), configHeader(config)...)
	if resp.StatusCode != 200 || resp.Header.Get("x-gateway-cache-status") != "HIT" || len(ant.seen) != before ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.HasSuffix(string(raw), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("stream: %d %q, provider called %d times: %s", resp.StatusCode, resp.Header.Get("x-gateway-cache-status"), len(ant.seen)-before, raw)
	}
}

// TestMessagesGuardrailFailWithoutDeny: an input guardrail that fails
// without deny lets the request through with status 246, and the answer,
// in Anthropic's shape, carries hook_results beside the message, for
// native targets and for translated ones, whose answer is converted from
// the chat format (the conversion used to drop them).
func TestMessagesGuardrailFailWithoutDeny(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = toolChat
	ant := messagesAnthropic(t)
	loadProviderSite(t)
	const fail = `"input_guardrails":[{"default.regexMatch":{"rule":"(?i)secret","not":true}}]`
	for _, tc := range []struct{ name, target string }{
		{"native", anthropicTarget(ant)},
		{"translated", openAITarget(up, "gpt-4o-mini")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := strings.Replace(tc.target, `{`, `{`+fail+`,`, 1)
			body := `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"tell me the SECRET"}]}`
			resp, raw := translatedDo(t, "POST", "/messages", []byte(body), configHeader(config)...)
			if resp.StatusCode != 246 || gjson.GetBytes(raw, "type").Str != "message" {
				t.Fatalf("status %d: %s", resp.StatusCode, raw)
			}
			if h := gjson.GetBytes(raw, "hook_results.before_request_hooks.0"); !h.Exists() || h.Get("verdict").Bool() {
				t.Fatalf("the 246 answer lacks the failed hook's results: %s", raw)
			}
		})
	}
}
