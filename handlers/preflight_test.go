package handlers

import (
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// preflightRequest is a request planned for targets running models, all
// sent body.
func preflightRequest(op providers.Operation, body []byte, models ...string) *Request {
	q := &Request{}
	for _, m := range models {
		t := &routing.Target{Settings: providers.Settings{Provider: "openai"}}
		q.attempts = append(q.attempts, attemptPlan{target: t, op: op, body: body, model: m})
	}
	return q
}

func TestPreflight(t *testing.T) {
	long := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 30000) + `"}]}`
	tests := []struct {
		name   string
		op     providers.Operation
		body   string
		models []string
		unfit  []bool
	}{
		{"short", providers.OpChat, chatJSON, []string{"gpt-4", "gpt-4o"}, []bool{false, false}},
		{"long", providers.OpChat, long, []string{"gpt-4o", "o3", "gpt-4", "unknown-model"}, []bool{true, false, true, false}},
		{"long responses", providers.OpResponses, long, []string{"gpt-4o", "gpt-4.1"}, []bool{true, false}},
		{"embeddings are not checked", providers.OpEmbeddings, long, []string{"gpt-4o"}, []bool{false}},
		{"count_tokens is not checked", providers.OpCountTokens, long, []string{"gpt-4o"}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := preflightRequest(tt.op, []byte(tt.body), tt.models...)
			preflight(q, cost.Builtin())
			for i, want := range tt.unfit {
				u := q.attempts[i].target.Unfit
				if (u != nil) != want {
					t.Errorf("%s: unfit %+v, want %v", tt.models[i], u, want)
				}
				if u != nil && (u.Tokens <= u.Window || u.Model != tt.models[i]) {
					t.Errorf("%s: %+v", tt.models[i], u)
				}
			}
		})
	}
}

const chatJSON = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

// BenchmarkPreflight: what preflight adds to a request's planning, for a
// body below every window (the bytes bound, no tokenizer) and for a
// 160k-token one over gpt-4o's window (tokenized once, stopping past
// the largest window compared).
func BenchmarkPreflight(b *testing.B) {
	cat := cost.Builtin()
	long := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 32000) + `"}]}`)
	for _, bc := range []struct {
		name string
		body []byte
	}{{"small", []byte(chatJSON)}, {"160k_tokens", long}} {
		b.Run(bc.name, func(b *testing.B) {
			q := preflightRequest(providers.OpChat, bc.body, "gpt-4o", "o3")
			preflight(q, cat) // the vocabulary, once
			b.ReportAllocs()
			for b.Loop() {
				for i := range q.attempts {
					q.attempts[i].target.Unfit = nil
				}
				preflight(q, cat)
			}
		})
	}
}
