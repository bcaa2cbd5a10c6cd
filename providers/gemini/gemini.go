// Package gemini translates OpenAI chat completions and embeddings to and
// from Google's Gemini API, and registers the "google" provider (the
// Gemini API with an API key). The translation is shared with vertex-ai,
// which sends the same generateContent bodies to Vertex AI.
package gemini

import (
	"net/http"
	"strings"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Slug is the Gemini API provider's name.
const Slug = "google"

// BaseURL is the Gemini API host. custom_host replaces it, as in the
// reference gateway, and the versioned paths (/v1beta/models/…) are
// appended to either.
const BaseURL = "https://generativelanguage.googleapis.com"

// apiVersion prefixes every path the gateway sends to the Gemini API.
const apiVersion = "/v1beta"

func init() {
	providers.Register(Slug, provider{})
}

type provider struct{}

// Model checks a model id that becomes a URL path segment and strips the
// "models/" prefix the Gemini API also accepts. Only letters, digits and
// ".-_@" are allowed, so a model cannot change the path.
func Model(model string) (string, error) {
	model = strings.TrimPrefix(model, "models/")
	if model == "" {
		return "", apierror.BadRequest("model", "model is required")
	}
	for _, r := range model {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_', r == '@':
		default:
			return "", apierror.BadRequest("model", "model %q contains characters not allowed in a model id", model)
		}
	}
	return model, nil
}

// ChatMethod returns the method path suffix and query for a chat call.
func ChatMethod(stream bool) (suffix, query string) {
	if stream {
		return ":streamGenerateContent", "alt=sse"
	}
	return ":generateContent", ""
}

// Prepare implements providers.Provider. The key goes in x-goog-api-key,
// never in the URL, so it cannot leak into logs.
func (provider) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	base, err := providers.BaseURL(s.CustomHost, BaseURL, "")
	if err != nil {
		return err
	}
	if s.APIKey == "" {
		return providers.MissingKey(Slug, "send Authorization: Bearer <Gemini API key>, or use a virtual key")
	}
	path, query, body, method := c.Path, c.RawQuery, c.Body, c.Method
	switch c.Op {
	case providers.OpChat, providers.OpEmbeddings:
		model, err := Model(c.Model)
		if err != nil {
			return err
		}
		if c.Op == providers.OpChat {
			var suffix string
			suffix, query = ChatMethod(c.Stream)
			path = "/models/" + model + suffix
			body, err = BuildRequest(c.Body)
		} else {
			path, query = "/models/"+model+":batchEmbedContents", ""
			body, err = buildEmbedRequest(c.Body, model)
		}
		if err != nil {
			return err
		}
		method = http.MethodPost
		u.Header.Set("Content-Type", "application/json")
	case providers.OpCountTokens:
		model, err := Model(c.Model)
		if err != nil {
			return err
		}
		if body, err = CountRequest(c.Body, model); err != nil {
			return err
		}
		path, query, method = "/models/"+model+":countTokens", "", http.MethodPost
		u.Header.Set("Content-Type", "application/json")
	case providers.OpProxy, providers.OpModels:
		// Passed through with the key, for Gemini-native paths.
	default:
		return oaiwire.Unsupported(Slug, "/v1"+c.Path)
	}
	u.URL = providers.JoinParsedURL(base, apiVersion+path, query)
	u.Method, u.Body = method, body
	u.Header.Set("x-goog-api-key", s.APIKey)
	return nil
}

// Translator implements providers.Provider.
func (provider) Translator(op providers.Operation) providers.Translator {
	switch op {
	case providers.OpChat:
		return Chat{Provider: Slug}
	case providers.OpEmbeddings:
		return embeddings{}
	case providers.OpCountTokens:
		return CountTokens{Provider: Slug}
	}
	return nil
}
