package all

import "github.com/caddy-llm-gateway/caddy-llm-gateway/providers"

// aliases maps the neutral provider words configs may use ("vendor",
// "clouda", …) to the slugs that implement them, so either name reaches
// the provider. Imports above have registered the
// targets by the time this init runs.
var aliases = map[string]string{
	"vendor": "openai",
	"clouda": "bedrock",
	"cloudb": "azure-openai",
	"cloudc": "vertex-ai",
}

func init() {
	for alias, slug := range aliases {
		if p, ok := providers.Lookup(slug); ok {
			providers.Register(alias, p)
		}
	}
}
