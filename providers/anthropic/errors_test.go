package anthropic

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassifyError reads Messages API error bodies: recorded answers,
// and the billing_error and request_too_large types in the shape
// Anthropic's error reference documents.
func TestClassifyError(t *testing.T) {
	p, _ := providers.Lookup(Slug)
	tests := []struct {
		file   string
		status int
		want   providers.ErrorClass
	}{
		{"errors/prompt_too_long.json", 400, providers.ErrContextLength},
		{"errors/content_filtering.json", 400, providers.ErrContentPolicy},
		{"errors/rate_limit.json", 429, providers.ErrRateLimited},
		{"errors/credit_balance.json", 400, providers.ErrQuotaExhausted},
		{"errors/billing_error.json", 402, providers.ErrQuotaExhausted},
		{"errors/invalid_request.json", 400, providers.ErrInvalidRequest},
		{"errors/request_too_large.json", 413, providers.ErrInvalidRequest},
		{"errors/authentication.json", 401, ""},
		{"error_overloaded.json", 529, providers.ErrOverloaded},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := providers.Classify(p, tt.status, nil, body); got != tt.want {
				t.Fatalf("class %q, want %q", got, tt.want)
			}
		})
	}
}
