package responses

// nativeProviders are the provider slugs whose own API serves
// /v1/responses (OpenAI's wire format, their own storage and ids), so the
// gateway passes Responses requests to them untouched. OpenAI and Azure
// OpenAI define the API; xAI, Groq, OpenRouter and Fireworks document it
// for their OpenAI-compatible endpoints (research wave2 §1.6, §1.8).
var nativeProviders = map[string]bool{
	"openai":       true,
	"vendor":       true, // the neutral alias of openai
	"azure-openai": true,
	"cloudb":       true, // the neutral alias of azure-openai
	"x-ai":         true,
	"groq":         true,
	"openrouter":   true,
	"fireworks-ai": true,
}

// Native reports whether provider serves the Responses API itself. The
// pipeline decides per leaf target: native targets get the request as
// sent, every other target goes through ToChat, the chat call and
// FromChat or StreamWriter. Stored responses of native targets live with
// the provider, so GET/DELETE/input_items for their ids pass through.
func Native(provider string) bool { return nativeProviders[provider] }
