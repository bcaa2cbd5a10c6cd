package guardrails_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/guardrails"
)

// BenchmarkTwoCheapChecks is issue 10's cost target: a regex and a word
// count on a chat request, including the compiled-hook cache lookup and
// the building of results; ≤ 20 µs per request.
func BenchmarkTwoCheapChecks(b *testing.B) {
	rn := &guardrails.Runner{}
	h := hooks(`{"id":"cheap","deny":true,"checks":[
		{"id":"default.regexMatch","parameters":{"rule":"(?i)ignore (all|previous) instructions","not":true}},
		{"id":"default.wordCount","parameters":{"minWords":1,"maxWords":500}}]}`)
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "system", "content": "You are a helpful assistant."},
		map[string]any{"role": "user", "content": "Write a haiku about the sea, the wind and the light of an early morning in autumn."},
	}})
	req := &guardrails.Request{Body: body, Type: "chatComplete", Provider: "openai", Model: "gpt-4o"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := rn.Before(ctx, h, req)
		if err != nil || res.Denied() || res.Failed() {
			b.Fatal(err, res.Hooks)
		}
	}
}

// BenchmarkNoHooks shows that a config without hooks costs nothing.
func BenchmarkNoHooks(b *testing.B) {
	rn := &guardrails.Runner{}
	req := &guardrails.Request{Body: []byte(`{}`), Type: "chatComplete"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		before, _ := rn.Before(ctx, nil, req)
		after, _ := rn.After(ctx, nil, req, nil)
		_ = guardrails.Status(before, after, 200)
	}
}
