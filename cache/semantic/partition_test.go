package semantic

import (
	"testing"
)

func TestPartitionKey(t *testing.T) {
	base := PartitionParts{Op: "chat", Method: "POST", Path: "/v1/chat/completions", Workspace: "ws1", Namespace: "ns", Target: "openai|api.openai.com|fp", Model: "gpt-4o", Embedder: "emb|text-embedding-3-small"}
	body := `{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of France?"}]}`
	ref, err := PartitionKey(base, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*PartitionParts)) PartitionParts { p := base; f(&p); return p }
	tests := []struct {
		name  string
		parts PartitionParts
		body  string
		same  bool
	}{
		{"identical", base, body, true},
		{"other question, same partition", base, `{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Capital city of France?"}]}`, true},
		{"key order and stream do not matter", base, `{"stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"x"}],"model":"gpt-4o"}`, true},
		{"workspace", with(func(p *PartitionParts) { p.Workspace = "ws2" }), body, false},
		{"namespace", with(func(p *PartitionParts) { p.Namespace = "other" }), body, false},
		{"metadata when no namespace", with(func(p *PartitionParts) { p.Namespace = ""; p.Metadata = `{"u":"1"}` }), body, false},
		{"target", with(func(p *PartitionParts) { p.Target = "openai|api.openai.com|fp2" }), body, false},
		{"model", with(func(p *PartitionParts) { p.Model = "gpt-4o-mini" }), body, false},
		{"embedder", with(func(p *PartitionParts) { p.Embedder = "emb|text-embedding-3-large" }), body, false},
		{"endpoint", with(func(p *PartitionParts) { p.Path = "/v1/completions" }), body, false},
		{"parts do not run together", with(func(p *PartitionParts) { p.Target = "openai|api.openai.com|fpgpt-4o"; p.Model = "" }), body, false},
		{"temperature", base, `{"model":"gpt-4o","temperature":0.3,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"x"}]}`, false},
		{"extra parameter", base, `{"model":"gpt-4o","temperature":0.2,"max_tokens":5,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"x"}]}`, false},
		{"system prompt", base, `{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"answer in French"},{"role":"user","content":"x"}]}`, false},
		{"body model", base, `{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"x"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PartitionKey(tt.parts, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if (got == ref) != tt.same {
				t.Fatalf("same partition = %v, want %v", got == ref, tt.same)
			}
		})
	}
}

func TestPartitionKeyHistoryBeyondCap(t *testing.T) {
	// Turns before the last MaxTurns are not embedded, so they must match
	// exactly: a different early history is another partition.
	mk := func(first string) string {
		return `{"messages":[{"role":"user","content":"` + first + `"},{"role":"assistant","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"user","content":"d"}]}`
	}
	p := PartitionParts{Op: "chat"}
	a, err := PartitionKey(p, []byte(mk("one")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := PartitionKey(p, []byte(mk("two")))
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("turns outside the embedded window did not partition")
	}
	ta, _ := EmbedText([]byte(mk("one")))
	tb, _ := EmbedText([]byte(mk("two")))
	if ta != tb {
		t.Fatalf("embedded texts differ: %q vs %q", ta, tb)
	}
}

func TestPartitionKeyNotEligible(t *testing.T) {
	for _, b := range []string{`{"input":"x"}`, `[1]`, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`} {
		if _, err := PartitionKey(PartitionParts{}, []byte(b)); err != ErrNotEligible {
			t.Errorf("%s: err = %v, want ErrNotEligible", b, err)
		}
	}
}
