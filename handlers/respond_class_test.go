package handlers

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassBody: an error body carries its class in error.error_type;
// in OpenAI's envelope error.code becomes the class only when the
// provider sent none; the flat vLLM error becomes the envelope; other
// bodies, and answers of no class, are left as they are.
func TestClassBody(t *testing.T) {
	const ctx = providers.ErrContextLength
	tests := []struct {
		name      string
		body      string
		class     providers.ErrorClass
		anthropic bool
		want      string
	}{
		{"code kept", `{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`, ctx, false,
			`{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"context_length_exceeded","error_type":"context_length_exceeded"}}`},
		{"null code set", `{"error":{"message":"m","type":"server_error","param":null,"code":null}}`, providers.ErrOverloaded, false,
			`{"error":{"message":"m","type":"server_error","param":null,"code":"overloaded","error_type":"overloaded"}}`},
		{"absent code set", `{"error":{"message":"m"}}`, ctx, false,
			`{"error":{"message":"m","code":"context_length_exceeded","error_type":"context_length_exceeded"}}`},
		{"numeric code kept", `{"error":{"message":"m","code":400}}`, ctx, false,
			`{"error":{"message":"m","code":400,"error_type":"context_length_exceeded"}}`},
		{"flat wrapped", `{"object":"error","message":"m","type":"BadRequestError","param":null,"code":null}`, ctx, false,
			`{"error":{"message":"m","type":"BadRequestError","param":null,"code":"context_length_exceeded","error_type":"context_length_exceeded"}}`},
		{"anthropic", `{"type":"error","error":{"type":"invalid_request_error","message":"m"}}`, ctx, true,
			`{"type":"error","error":{"type":"invalid_request_error","message":"m","error_type":"context_length_exceeded"}}`},
		{"anthropic flat left", `{"object":"error","message":"m"}`, ctx, true, `{"object":"error","message":"m"}`},
		{"no class", `{"error":{"message":"m","code":null}}`, "", false, `{"error":{"message":"m","code":null}}`},
		{"string error left", `{"error":"model not found"}`, ctx, false, `{"error":"model not found"}`},
		{"not an object", `[{"error":{"message":"m"}}]`, ctx, false, `[{"error":{"message":"m"}}]`},
		{"duplicate member left", `{"error":{"message":"m","code":null,"code":"x"}}`, ctx, false, `{"error":{"message":"m","code":null,"code":"x"}}`},
		{"not JSON", `<html>busy</html>`, ctx, false, `<html>busy</html>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(classBody([]byte(tt.body), tt.class, tt.anthropic)); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
