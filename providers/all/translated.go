package all

import (
	// Translated providers: Anthropic, Gemini API (google), Vertex AI and Cohere.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/anthropic"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/cohere"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/gemini"
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/vertex"
)
