package gemini

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassifyError reads Google API error bodies as the Gemini API
// sends them. Gemini reports blocked prompts and answers in 200 answers
// (response_blocked.json), so it has no content-policy error shape.
func TestClassifyError(t *testing.T) {
	p, _ := providers.Lookup(Slug)
	tests := []struct {
		file   string
		status int
		want   providers.ErrorClass
	}{
		{"errors/input_token_count.json", 400, providers.ErrContextLength},
		{"errors/stream_array.json", 400, providers.ErrContextLength},
		{"errors/rate_limit.json", 429, providers.ErrRateLimited},
		{"errors/daily_quota.json", 429, providers.ErrQuotaExhausted},
		{"errors/overloaded.json", 503, providers.ErrOverloaded},
		{"errors/invalid_argument.json", 400, providers.ErrInvalidRequest},
		{"error_400.json", 400, ""}, // an invalid API key
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
