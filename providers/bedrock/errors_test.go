package bedrock

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassifyError reads Bedrock runtime errors, the error name in the
// x-amzn-ErrorType header as Bedrock sends it (and once in "__type"
// only). Messages are Bedrock's wordings as its API reference and
// reported answers give them.
func TestClassifyError(t *testing.T) {
	p, _ := providers.Lookup(Slug)
	tests := []struct {
		file, name string
		status     int
		want       providers.ErrorClass
	}{
		{"converse_input_too_long.json", "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/", 400, providers.ErrContextLength},
		{"invoke_prompt_too_long.json", "ValidationException", 400, providers.ErrContextLength},
		{"content_filters.json", "ValidationException", 400, providers.ErrContentPolicy},
		{"throttling.json", "ThrottlingException", 429, providers.ErrRateLimited},
		{"throttling_daily.json", "ThrottlingException", 429, providers.ErrQuotaExhausted},
		{"service_quota.json", "ServiceQuotaExceededException", 400, providers.ErrQuotaExhausted},
		{"model_not_ready.json", "ModelNotReadyException", 429, providers.ErrOverloaded},
		{"service_unavailable.json", "ServiceUnavailableException", 503, providers.ErrOverloaded},
		{"validation.json", "ValidationException", 400, providers.ErrInvalidRequest},
		{"access_denied.json", "AccessDeniedException", 403, ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "errors", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{"X-Amzn-Errortype": {tt.name}}
			if got := providers.Classify(p, tt.status, h, body); got != tt.want {
				t.Fatalf("class %q, want %q", got, tt.want)
			}
		})
	}
	// The name in the body when the header is missing.
	body := []byte(`{"__type":"com.amazon.coral#ThrottlingException","message":"Rate exceeded"}`)
	if got := providers.Classify(p, 400, nil, body); got != providers.ErrRateLimited {
		t.Fatalf("__type: %q", got)
	}
}
