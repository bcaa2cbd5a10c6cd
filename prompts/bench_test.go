package prompts

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkRender is the cost of one render or prompt completion's
// preparation: parsing the body, checking the variables, rendering two
// messages (one with a section over a list) and writing the request body.
func BenchmarkRender(b *testing.B) {
	v := &Version{
		Messages: []Message{
			{Role: "system", Content: mustMarshal("You are the support assistant of {{company}}. Answer in at most {{max_sentences}} sentences.{{#customer.vip}} The customer is a VIP.{{/customer.vip}} Products:{{#products}} {{sku}}={{title}};{{/products}}")},
			{Role: "user", Content: mustMarshal("{{customer.name}} asks: {{question}}")},
		},
		Model:           "gpt-4o-mini",
		Hyperparameters: map[string]json.RawMessage{"temperature": json.RawMessage("0.2"), "max_tokens": json.RawMessage("300")},
	}
	if err := v.validate(""); err != nil {
		b.Fatal(err)
	}
	p := &Prompt{Slug: "support-reply"}
	body := []byte(`{"variables":{"company":"Acme","max_sentences":3,"question":"Where is my parcel? It was due <yesterday> & never came.","customer":{"name":"Ada","vip":true},"products":[{"sku":"M-1","title":"blue mug"},{"sku":"M-2","title":"red mug"}]},"temperature":0.5,"stream":true}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := RenderRequest(p, v, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolve is the cached lookup of a prompt by slug with a suffix.
func BenchmarkResolve(b *testing.B) {
	var files []*Prompt
	for _, s := range []string{"a", "b", "c", "support-reply"} {
		files = append(files, testPrompt(b, s, 1, "x", "y"))
	}
	reg, err := NewRegistry(files, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Resolve(ctx, reg, wsA, "support-reply@latest"); err != nil {
			b.Fatal(err)
		}
	}
}
