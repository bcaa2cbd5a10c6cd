package jobs

import (
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// Providers with OpenAI's job APIs at OpenAI's paths and shapes, so the
// gateway passes their files, batches and fine-tuning jobs through
// (research/wave2.md §2.1, §2.2, §2.7). "vendor" and "cloudb" are the
// specification's words for openai and azure-openai (providers/all).
// Bedrock and Vertex have batch jobs, but under other paths and shapes
// (S3/GCS input, their own states); until a translation exists they get
// managed batches, like every provider without a batch API.
var (
	batchAPI      = set("openai", "azure-openai", "vendor", "cloudb")
	filesAPI      = set("openai", "azure-openai", "vendor", "cloudb")
	fineTuningAPI = set("openai", "azure-openai", "vendor", "cloudb")
)

func set(slugs ...string) map[string]bool {
	m := make(map[string]bool, len(slugs))
	for _, s := range slugs {
		m[s] = true
	}
	return m
}

// ProviderHasBatchAPI reports whether the provider slug has OpenAI's
// /v1/batches API; batches to other providers are managed by the gateway.
func ProviderHasBatchAPI(slug string) bool { return batchAPI[strings.ToLower(slug)] }

// ProviderHasFilesAPI reports whether the provider slug has OpenAI's
// /v1/files API; uploads for other providers are kept by the gateway.
func ProviderHasFilesAPI(slug string) bool { return filesAPI[strings.ToLower(slug)] }

// ProviderHasFineTuning reports whether the provider slug has OpenAI's
// /v1/fine_tuning/jobs API.
func ProviderHasFineTuning(slug string) bool { return fineTuningAPI[strings.ToLower(slug)] }

// CheckFineTuningProvider returns a 400 naming the provider when it has
// no fine-tuning API, so a fine-tuning request is never passed through
// to a path the provider does not serve.
func CheckFineTuningProvider(slug string) error {
	if ProviderHasFineTuning(slug) {
		return nil
	}
	return apierror.BadRequest("provider", "provider %s does not support fine-tuning jobs through the gateway (supported: openai, azure-openai)",
		apierror.QuoteID(slug)).WithCode("unsupported_provider")
}
