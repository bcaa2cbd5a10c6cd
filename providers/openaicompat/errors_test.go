package openaicompat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestClassifyError reads recorded error bodies of OpenAI and of the
// servers reached through its rows (vLLM, SGLang and llama.cpp through
// openai-compatible, Groq, Mistral, Ollama). Bodies marked "documented"
// follow the server's source or docs, not a captured answer. Local
// servers have no content filter, so they have no content-policy shape.
func TestClassifyError(t *testing.T) {
	p, _ := providers.Lookup("openai-compatible")
	tests := []struct {
		file   string
		status int
		want   providers.ErrorClass
	}{
		{"openai_context_length.json", 400, providers.ErrContextLength},
		{"openai_content_policy.json", 400, providers.ErrContentPolicy},
		{"openai_rate_limit.json", 429, providers.ErrRateLimited},
		{"openai_insufficient_quota.json", 429, providers.ErrQuotaExhausted},
		{"openai_overloaded.json", 503, providers.ErrOverloaded},
		{"openai_invalid_value.json", 400, providers.ErrInvalidRequest},
		{"openai_invalid_api_key.json", 401, ""},
		{"openai_server_error.json", 500, ""},
		{"vllm_context_length_flat.json", 400, providers.ErrContextLength}, // vLLM's older flat envelope
		{"vllm_context_length.json", 400, providers.ErrContextLength},
		{"vllm_invalid.json", 400, providers.ErrInvalidRequest},
		{"sglang_context_length.json", 400, providers.ErrContextLength}, // documented (SGLang's tokenizer manager)
		{"llamacpp_context_size.json", 400, providers.ErrContextLength}, // llama-server's exceed_context_size_error
		{"llamacpp_loading.json", 503, providers.ErrOverloaded},         // llama-server while the model loads
		{"ollama_not_found.json", 404, ""},
		{"groq_context_length.json", 400, providers.ErrContextLength},
		{"mistral_context_length.json", 400, providers.ErrContextLength}, // documented wording
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
	// Every row of the table classifies alike: OpenAI itself too.
	openai, _ := providers.Lookup("openai")
	if _, ok := openai.(providers.ErrorClassifier); !ok {
		t.Fatal("openai has no classifier")
	}
	// A proxy's HTML page says nothing but its status.
	if got := providers.Classify(p, 429, nil, []byte("<html>Too Many Requests</html>")); got != providers.ErrRateLimited {
		t.Fatalf("html 429: %q", got)
	}
	if got := providers.Classify(p, 200, nil, []byte(`{"error":{"code":"context_length_exceeded"}}`)); got != "" {
		t.Fatalf("a success has no class: %q", got)
	}
}
