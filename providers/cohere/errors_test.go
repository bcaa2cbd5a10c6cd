package cohere

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassifyError reads Cohere's error bodies ({"id","message"}), with
// the messages Cohere's error reference and rate-limit page give.
func TestClassifyError(t *testing.T) {
	p, _ := providers.Lookup(Slug)
	tests := []struct {
		file   string
		status int
		want   providers.ErrorClass
	}{
		{"errors/too_many_tokens.json", 400, providers.ErrContextLength},
		{"errors/size_limit.json", 400, providers.ErrContextLength},
		{"errors/blocked_input.json", 400, providers.ErrContentPolicy},
		{"errors/blocked_output.json", 400, providers.ErrContentPolicy},
		{"errors/trial_per_minute.json", 429, providers.ErrRateLimited},
		{"errors/per_minute.json", 429, providers.ErrRateLimited},
		{"errors/trial_per_month.json", 429, providers.ErrQuotaExhausted},
		{"error_401.json", 401, ""},
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
