// Package cost prices requests: a catalog of per-token prices for the
// models of the built-in providers, an operator file in LiteLLM's
// model-price format that overrides or extends it, and the computation of
// a request's cost in US dollars from the usage its provider reported.
//
// A model the catalog does not know has no cost (known=false); the
// gateway never reports it as zero.
package cost

import (
	"strings"
)

// Price is what a model costs, in US dollars per token.
type Price struct {
	// Input is the price of a prompt token not read from a cache.
	Input float64
	// Output is the price of a completion token.
	Output float64
	// CachedInput is the price of a prompt token read from the
	// provider's prompt cache; used only when HasCachedInput.
	CachedInput    float64
	HasCachedInput bool
	// CacheWrite is the price of a prompt token written to the
	// provider's prompt cache (Anthropic's and Bedrock's cache writes);
	// used only when HasCacheWrite, else such tokens cost Input.
	CacheWrite    float64
	HasCacheWrite bool
	// Reasoning is the price of a reasoning (thinking) token; used only
	// when HasReasoning, else reasoning tokens cost Output.
	Reasoning    float64
	HasReasoning bool
	// AudioInput and AudioOutput are the prices of an audio input
	// token not read from a cache and of an audio output token (the
	// Realtime API's); used only when their Has field is set, else audio
	// tokens cost Input and Output (CostAudio).
	AudioInput     float64
	HasAudioInput  bool
	AudioOutput    float64
	HasAudioOutput bool
	// CachedAudioInput is the price of an audio input token read from
	// the cache (LiteLLM's cache_read_input_audio_token_cost); used only
	// when HasCachedAudioInput, else cached audio costs CachedInput.
	// OpenAI's realtime mini models price the two differently.
	CachedAudioInput    float64
	HasCachedAudioInput bool
	// BatchInput and BatchOutput are the prices of a prompt and a
	// completion token in the provider's batch job API (LiteLLM's
	// input_cost_per_token_batches, output_cost_per_token_batches); used
	// only when HasBatch, else BatchCost applies the provider's published
	// batch discount (BatchDiscount) to the on-demand prices.
	BatchInput, BatchOutput float64
	HasBatch                bool
	// Source is the page the figure was read from and AsOf the date it is
	// known to hold, when the catalog entry says so.
	Source string
	AsOf   string
}

// Catalog maps (provider, model) to prices. A Catalog is immutable once
// built, so one value is safely shared by every request.
type Catalog struct {
	// byProvider is keyed by the gateway's provider slug, then the model
	// name as the provider spells it.
	byProvider map[string]map[string]Price
	// anyProvider holds entries whose provider the file did not name in
	// a way the gateway knows; they match any provider.
	anyProvider map[string]Price
	// windows holds the models' context windows (window.go), keyed as
	// byProvider is; "" holds those of no known provider.
	windows map[string]map[string]int64
}

// Len returns the number of priced (provider, model) entries.
func (c *Catalog) Len() int {
	if c == nil {
		return 0
	}
	n := len(c.anyProvider)
	for _, m := range c.byProvider {
		n += len(m)
	}
	return n
}

func (c *Catalog) put(provider, model string, p Price) {
	if provider == "" {
		if c.anyProvider == nil {
			c.anyProvider = map[string]Price{}
		}
		c.anyProvider[model] = p
		return
	}
	if c.byProvider == nil {
		c.byProvider = map[string]map[string]Price{}
	}
	m := c.byProvider[provider]
	if m == nil {
		m = map[string]Price{}
		c.byProvider[provider] = m
	}
	m[model] = p
}

// merge returns a new catalog holding c's entries replaced or extended by
// over's.
func (c *Catalog) merge(over *Catalog) *Catalog {
	out := &Catalog{}
	for _, src := range []*Catalog{c, over} {
		if src == nil {
			continue
		}
		for p, m := range src.byProvider {
			for model, price := range m {
				out.put(p, model, price)
			}
		}
		for model, price := range src.anyProvider {
			out.put("", model, price)
		}
		for p, m := range src.windows {
			for model, w := range m {
				out.putWindow(p, model, w)
			}
		}
	}
	return out
}

// providerAliases are the specification's neutral provider words
// (providers/all/aliases.go), so a caller may pass either.
var providerAliases = map[string]string{
	"vendor": "openai",
	"clouda": "bedrock",
	"cloudb": "azure-openai",
	"cloudc": "vertex-ai",
}

// inherits names the provider whose prices apply to a provider's models
// when it has no entry of its own: Azure OpenAI's global-standard
// deployments cost what OpenAI charges (data-zone and regional
// deployments cost more; price them in an override file).
var inherits = map[string]string{
	"azure-openai": "openai",
}

// bedrockRegionPrefixes are the geography prefixes of Bedrock
// cross-region inference profiles ("us.anthropic.claude-…"), which bill as
// the base model.
var bedrockRegionPrefixes = []string{"us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca."}

// Price returns the price of model served by provider (a gateway slug
// such as "openai", "azure-openai", "bedrock", or a neutral alias such as
// "vendor"). Resolution, first match wins:
//
//  1. names tried, in order: the model as given; without a "provider/"
//     prefix naming this provider; without Gemini's "models/" prefix;
//     for Fireworks without "accounts/fireworks/models/"; for Bedrock
//     without a cross-region prefix ("us.", "eu.", …); then each of
//     those with a trailing date removed ("-2024-08-06", "-20241022",
//     "@20241022"), so a dated snapshot the catalog does not list costs
//     what its family costs, while a snapshot the catalog lists
//     (gpt-4o-2024-05-13) keeps its own price; or with a "-latest"
//     alias suffix removed; or, for a Bedrock id, its version ("-v1:0"),
//     then also its date, removed;
//  2. for each name: the provider's entries, then those of the provider
//     it inherits from (azure-openai → openai), then entries that named
//     no known provider.
func (c *Catalog) Price(provider, model string) (Price, bool) {
	if c == nil {
		return Price{}, false
	}
	var p Price
	found := resolve(provider, model, func(provider, name string) bool {
		var ok bool
		p, ok = c.lookup(provider, name)
		return ok
	})
	return p, found
}

// resolve tries the names of model in Price's order, asking look for
// each (with the provider's neutral alias resolved) until it finds one.
func resolve(provider, model string, look func(provider, name string) bool) bool {
	if model == "" {
		return false
	}
	if a, ok := providerAliases[provider]; ok {
		provider = a
	}
	var buf [8]string
	names := candidates(buf[:0], provider, model)
	for _, n := range names {
		if look(provider, n) {
			return true
		}
	}
	// Snapshot and alias fallbacks, tried only after every exact name
	// missed, so a listed snapshot keeps its own price.
	for _, n := range names {
		if base, ok := stripDateSuffix(n); ok && look(provider, base) {
			return true
		}
		if base, ok := stripAliasSuffix(provider, n); ok {
			if look(provider, base) {
				return true
			}
			if base, ok := stripDateSuffix(base); ok && look(provider, base) {
				return true
			}
		}
	}
	return false
}

// stripAliasSuffix removes the "-latest" of a moving alias
// ("claude-3-5-sonnet-latest", "mistral-large-latest"), which costs what
// the model it points at costs; for Bedrock it removes a model id's
// version ("anthropic.claude-x-20250101-v1:0" →
// "anthropic.claude-x-20250101"), a form the catalog may list without
// it. Price then also tries the result without a date.
func stripAliasSuffix(provider, m string) (string, bool) {
	if base, ok := strings.CutSuffix(m, "-latest"); ok && base != "" {
		return base, true
	}
	if provider != "bedrock" {
		return "", false
	}
	i := strings.LastIndex(m, "-v")
	if i <= 0 {
		return "", false
	}
	major, minor, ok := strings.Cut(m[i+2:], ":")
	if !ok || !digits(major) || !digits(minor) {
		return "", false
	}
	return m[:i], true
}

func (c *Catalog) lookup(provider, model string) (Price, bool) {
	if p, ok := c.byProvider[provider][model]; ok {
		return p, true
	}
	if parent, ok := inherits[provider]; ok {
		if p, ok := c.byProvider[parent][model]; ok {
			return p, true
		}
	}
	p, ok := c.anyProvider[model]
	return p, ok
}

// candidates appends the model names tried before date stripping.
func candidates(out []string, provider, model string) []string {
	out = append(out, model)
	m := model
	if rest, ok := strings.CutPrefix(m, provider+"/"); ok && rest != "" {
		m = rest
		out = append(out, m)
	} else if pre := litellmPrefixFor(provider); pre != "" {
		if rest, ok := strings.CutPrefix(m, pre+"/"); ok && rest != "" {
			m = rest
			out = append(out, m)
		}
	}
	if rest, ok := strings.CutPrefix(m, "models/"); ok && rest != "" {
		m = rest
		out = append(out, m)
	}
	if provider == "fireworks-ai" {
		// Fireworks names its own models by account path; the catalog
		// lists them by the model's short name.
		if rest, ok := strings.CutPrefix(m, "accounts/fireworks/models/"); ok && rest != "" {
			m = rest
			out = append(out, m)
		}
	}
	if provider == "bedrock" {
		for _, pre := range bedrockRegionPrefixes {
			if rest, ok := strings.CutPrefix(m, pre); ok && rest != "" {
				out = append(out, rest)
				break
			}
		}
	}
	return out
}

// stripDateSuffix removes a trailing snapshot date: "-YYYY-MM-DD",
// "-YYYYMMDD" or "@YYYYMMDD".
func stripDateSuffix(m string) (string, bool) {
	if n := len(m); n > 11 && m[n-11] == '-' && m[n-6] == '-' && m[n-3] == '-' &&
		digits(m[n-10:n-6]) && digits(m[n-5:n-3]) && digits(m[n-2:]) && strings.HasPrefix(m[n-10:], "20") {
		return m[:n-11], true
	}
	if n := len(m); n > 9 && (m[n-9] == '-' || m[n-9] == '@') && digits(m[n-8:]) && strings.HasPrefix(m[n-8:], "20") {
		return m[:n-9], true
	}
	return "", false
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
