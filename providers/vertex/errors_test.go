package vertex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassifyError reads Vertex AI's two error shapes: Anthropic's for
// Claude models, Google's for Gemini models and for Vertex's own quota
// refusals (in front of Claude too).
func TestClassifyError(t *testing.T) {
	p, _ := providers.Lookup(Slug)
	tests := []struct {
		file   string
		status int
		want   providers.ErrorClass
	}{
		{"claude_prompt_too_long.json", 400, providers.ErrContextLength},
		{"claude_content_filtering.json", 400, providers.ErrContentPolicy},
		{"claude_overloaded.json", 529, providers.ErrOverloaded},
		{"gemini_input_token_count.json", 400, providers.ErrContextLength},
		{"quota_per_minute.json", 429, providers.ErrRateLimited},
		{"resource_exhausted.json", 429, providers.ErrRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "errors", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := providers.Classify(p, tt.status, nil, body); got != tt.want {
				t.Fatalf("class %q, want %q", got, tt.want)
			}
		})
	}
}
