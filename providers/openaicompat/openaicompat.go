// Package openaicompat registers every provider that speaks OpenAI's wire
// format. They differ only in base URL and a few flags, so they are rows of
// one table rather than packages of their own.
package openaicompat

import (
	"net/url"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Row describes one OpenAI-compatible provider.
type Row struct {
	Slug    string
	BaseURL string // empty: custom_host is required
	// StreamUsage is true when the provider accepts
	// stream_options.include_usage, so the gateway can ask for usage in
	// every stream.
	StreamUsage bool
	// KeyOptional is true for local servers that need no credential.
	KeyOptional bool
	// OrgHeaders is true for OpenAI itself, whose organization and project
	// headers come from vendor_organization and vendor_project.
	OrgHeaders bool
	// HostPath, when set, makes custom_host the server's host (and any
	// path prefix) with HostPath always appended, as the reference gateway
	// does for providers whose base URL is a host (Ollama: custom_host
	// "http://gpu:11434" reaches /v1/chat/completions). Otherwise
	// custom_host replaces the whole base URL (see providers.CustomBase).
	HostPath string
}

// Table is the list of OpenAI-compatible providers. Adding a provider that
// speaks OpenAI's format is adding a row here.
var Table = []Row{
	{Slug: "openai", BaseURL: "https://api.openai.com/v1", StreamUsage: true, OrgHeaders: true},
	{Slug: "groq", BaseURL: "https://api.groq.com/openai/v1", StreamUsage: true},
	{Slug: "mistral-ai", BaseURL: "https://api.mistral.ai/v1"},
	{Slug: "together-ai", BaseURL: "https://api.together.xyz/v1", StreamUsage: true},
	{Slug: "deepseek", BaseURL: "https://api.deepseek.com/v1", StreamUsage: true},
	{Slug: "fireworks-ai", BaseURL: "https://api.fireworks.ai/inference/v1", StreamUsage: true},
	{Slug: "openrouter", BaseURL: "https://openrouter.ai/api/v1", StreamUsage: true},
	{Slug: "perplexity-ai", BaseURL: "https://api.perplexity.ai"},
	{Slug: "x-ai", BaseURL: "https://api.x.ai/v1", StreamUsage: true},
	{Slug: "cerebras", BaseURL: "https://api.cerebras.ai/v1", StreamUsage: true},
	{Slug: "deepinfra", BaseURL: "https://api.deepinfra.com/v1/openai", StreamUsage: true},
	{Slug: "sambanova", BaseURL: "https://api.sambanova.ai/v1", StreamUsage: true},
	{Slug: "nebius", BaseURL: "https://api.studio.nebius.ai/v1", StreamUsage: true},
	{Slug: "ollama", BaseURL: "http://localhost:11434/v1", StreamUsage: true, KeyOptional: true, HostPath: "/v1"},
	{Slug: "openai-compatible", StreamUsage: true, KeyOptional: true},
}

func init() {
	for i := range Table {
		providers.Register(Table[i].Slug, &compat{row: Table[i]})
	}
}

type compat struct{ row Row }

// Prepare implements providers.Provider.
func (p *compat) Prepare(c *providers.Call, s *providers.Settings, u *providers.Upstream) error {
	if s.CustomHost == "" && p.row.BaseURL == "" {
		return apierror.BadRequest("custom_host", "provider %q needs custom_host (the x-gateway-custom-host header or the config's custom_host)", p.row.Slug)
	}
	base, err := p.base(s.CustomHost)
	if err != nil {
		return err
	}
	if s.APIKey == "" && !p.row.KeyOptional {
		return providers.MissingKey(p.row.Slug, "send Authorization: Bearer <provider key>, or use a virtual key")
	}
	u.Method, u.URL, u.Body = c.Method, providers.JoinParsedURL(base, c.Path, c.RawQuery), c.Body
	if s.APIKey != "" {
		u.Header.Set("Authorization", "Bearer "+s.APIKey)
	}
	if p.row.OrgHeaders {
		if s.VendorOrganization != "" {
			u.Header.Set("OpenAI-Organization", s.VendorOrganization)
		}
		if s.VendorProject != "" {
			u.Header.Set("OpenAI-Project", s.VendorProject)
		}
	}
	if c.Stream && p.row.StreamUsage && (c.Op == providers.OpChat || c.Op == providers.OpCompletions) {
		u.Body, u.Tail, c.UsageAdded = providers.StreamUsageParts(c.Body)
	}
	return nil
}

// Translator implements providers.Provider: these providers need none.
func (p *compat) Translator(providers.Operation) providers.Translator { return nil }

// base is the row's base URL or the custom host. A custom host given
// without a path gets "/v1", which is where OpenAI-compatible servers
// (vLLM, llama.cpp, Ollama, LM Studio) serve their API; for a row with
// HostPath, HostPath is appended to whatever path it has.
func (p *compat) base(customHost string) (*url.URL, error) {
	if customHost == "" || p.row.HostPath == "" {
		return providers.BaseURL(customHost, p.row.BaseURL, "/v1")
	}
	u, err := providers.CustomBase(customHost, "")
	if err != nil {
		return nil, err
	}
	u.Path += p.row.HostPath
	return u, nil
}
