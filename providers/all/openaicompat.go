// Package all links every provider family into the binary. Each family
// adds one file here with its blank import, so registering a provider
// never touches the module's root.
package all

import (
	// OpenAI and the OpenAI-compatible providers.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/openaicompat"
)
