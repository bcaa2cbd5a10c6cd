package all

import "github.com/caddy-llm-gateway/caddy-llm-gateway/providers"

// aliases maps the specification's neutral provider words to the slugs
// that implement them, so a client that names a provider as the spec
// does ("clouda", …) reaches it. Imports above have registered the
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
