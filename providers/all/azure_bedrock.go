package all

import (
	// Azure OpenAI and Azure AI Foundry.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/azure"
	// Amazon Bedrock.
	_ "github.com/caddy-llm-gateway/caddy-llm-gateway/providers/bedrock"
)
