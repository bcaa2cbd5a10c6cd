// Package anthropic registers the "anthropic" provider: OpenAI chat
// completions translated to and from Anthropic's Messages API, streams
// included. Its translation is reused by vertex-ai for Claude models.
// Messages API calls (/v1/messages, /v1/messages/count_tokens) are sent
// as the client wrote them, their usage read on the way (Native); other
// paths are passed through with Anthropic's authentication.
package anthropic

import (
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/oaiwire"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Slug is the provider's name in configs and the x-gateway-provider header.
const Slug = "anthropic"

// BaseURL is Anthropic's API base; custom_host replaces it.
const BaseURL = "https://api.anthropic.com/v1"

// DefaultVersion is sent as anthropic-version when the client sends none.
const DefaultVersion = "2023-06-01"

func init() {
	providers.Register(Slug, provider{})
}

type provider struct{}

// Prepare implements providers.Provider.
func (provider) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	base, err := providers.BaseURL(s.CustomHost, BaseURL, "/v1")
	if err != nil {
		return err
	}
	if s.APIKey == "" {
		return providers.MissingKey(Slug, "send Authorization: Bearer <Anthropic API key>, or use a virtual key")
	}
	path, query, body, method := c.Path, c.RawQuery, c.Body, c.Method
	switch c.Op {
	case providers.OpChat:
		if body, err = BuildRequest(c.Body, Options{Stream: c.Stream}); err != nil {
			return err
		}
		path, query, method = "/messages", "", http.MethodPost
		u.Header.Set("Content-Type", "application/json")
	case providers.OpMessages, providers.OpCountTokens:
		// The client spoke the Messages API: its body goes as it is.
		path, query, method = c.Path, "", http.MethodPost
		u.Header.Set("Content-Type", "application/json")
	case providers.OpCompletions:
		return oaiwire.Unsupported(Slug, "/v1/completions (Anthropic retired its Text Completions API; use /v1/chat/completions)")
	case providers.OpProxy, providers.OpModels:
		// Passed through unchanged: Anthropic-native clients reach
		// /v1/messages and /v1/models this way.
	default:
		return oaiwire.Unsupported(Slug, "/v1"+c.Path)
	}
	u.URL = providers.JoinParsedURL(base, path, query)
	u.Method, u.Body = method, body
	SetHeaders(u.Header, c.Header, s.APIKey, true)
	return nil
}

// SetHeaders sets Anthropic's authentication and version headers. The
// client's anthropic-version and anthropic-beta win, so features in beta
// work through the gateway; withVersion is false for Vertex AI, which
// takes the version in the body.
func SetHeaders(h, client http.Header, key string, withVersion bool) {
	if key != "" {
		h.Set("x-api-key", key)
	}
	if withVersion {
		v := client.Get("anthropic-version")
		if v == "" {
			v = DefaultVersion
		}
		h.Set("anthropic-version", v)
	}
	if b := client.Values("anthropic-beta"); len(b) > 0 {
		h["Anthropic-Beta"] = b
	}
}

// Translator implements providers.Provider.
func (provider) Translator(op providers.Operation) providers.Translator {
	switch op {
	case providers.OpChat:
		return Chat{Provider: Slug}
	case providers.OpMessages:
		return Native{Provider: Slug}
	case providers.OpCountTokens:
		return CountTokens{Provider: Slug}
	}
	return nil
}

// SpeaksMessages implements providers.MessagesSpeaker: Anthropic serves
// the Messages API and count_tokens for every model.
func (provider) SpeaksMessages(providers.Operation, string) bool { return true }
