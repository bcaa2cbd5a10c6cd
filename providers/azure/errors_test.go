package azure

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassifyError reads Azure OpenAI's and Azure AI Foundry's error
// bodies (the 404 and 401 recorded for the provider tests among them).
func TestClassifyError(t *testing.T) {
	tests := []struct {
		file   string
		status int
		want   providers.ErrorClass
	}{
		{"errors/context_length.json", 400, providers.ErrContextLength},
		{"errors/content_filter.json", 400, providers.ErrContentPolicy},
		{"errors/ai_content_filter.json", 400, providers.ErrContentPolicy},
		{"errors/rate_limit.json", 429, providers.ErrRateLimited},
		{"errors/unavailable.json", 503, providers.ErrOverloaded},
		{"error_401.json", 401, ""},
		{"error_404_deployment.json", 404, ""},
	}
	for _, slug := range []string{SlugOpenAI, SlugAI} {
		p, _ := providers.Lookup(slug)
		for _, tt := range tests {
			t.Run(slug+"/"+tt.file, func(t *testing.T) {
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
}
