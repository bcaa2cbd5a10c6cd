package cost

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// MaxFileSize bounds a price file. LiteLLM's complete
// model_prices_and_context_window.json is about 1.5 MB.
const MaxFileSize = 16 << 20

//go:embed prices.json
var builtinJSON []byte

// realtimeJSON holds the Realtime API models' prices, audio included:
// the price database prices.json is generated from has none of them, so
// they are kept by hand from OpenAI's model pages (the file's _source).
//
//go:embed realtime.json
var realtimeJSON []byte

// builtin is parsed once, on first use rather than at start-up: the
// generated catalog has some 1,850 entries and most processes that link
// this package (tools, tests) never price anything. A broken embedded
// file is a build defect that the package's tests catch.
var builtin = sync.OnceValue(func() *Catalog {
	c, err := Parse(builtinJSON)
	if err != nil {
		panic("cost: embedded prices.json: " + err.Error())
	}
	w, err := Parse(windowsJSON)
	if err != nil {
		panic("cost: embedded windows.json: " + err.Error())
	}
	r, err := Parse(realtimeJSON)
	if err != nil {
		panic("cost: embedded realtime.json: " + err.Error())
	}
	return c.merge(w).merge(r)
})

// Builtin returns the catalog shipped with the gateway.
func Builtin() *Catalog { return builtin() }

// litellmProviders maps LiteLLM's litellm_provider values (and the key
// prefixes its file uses) to the gateway's provider slugs.
var litellmProviders = map[string]string{
	"openai":                        "openai",
	"text-completion-openai":        "openai",
	"anthropic":                     "anthropic",
	"gemini":                        "google",
	"google":                        "google",
	"vertex_ai":                     "vertex-ai",
	"vertex_ai-language-models":     "vertex-ai",
	"vertex_ai-anthropic_models":    "vertex-ai",
	"vertex_ai-embedding-models":    "vertex-ai",
	"vertex_ai-text-models":         "vertex-ai",
	"vertex_ai-chat-models":         "vertex-ai",
	"bedrock":                       "bedrock",
	"bedrock_converse":              "bedrock",
	"azure":                         "azure-openai",
	"azure_text":                    "azure-openai",
	"azure_ai":                      "azure-ai",
	"cohere":                        "cohere",
	"cohere_chat":                   "cohere",
	"mistral":                       "mistral-ai",
	"groq":                          "groq",
	"deepseek":                      "deepseek",
	"together_ai":                   "together-ai",
	"fireworks_ai":                  "fireworks-ai",
	"fireworks_ai-embedding-models": "fireworks-ai",
	"openrouter":                    "openrouter",
	"perplexity":                    "perplexity-ai",
	"xai":                           "x-ai",
	"cerebras":                      "cerebras",
	"deepinfra":                     "deepinfra",
	"sambanova":                     "sambanova",
	"nebius":                        "nebius",
	"ollama":                        "ollama",
	"ollama_chat":                   "ollama",
}

// litellmPrefixes is the key prefix LiteLLM's file uses for a slug's
// models, when it differs from the slug.
var litellmPrefixes = map[string]string{
	"google":        "gemini",
	"vertex-ai":     "vertex_ai",
	"azure-openai":  "azure",
	"azure-ai":      "azure_ai",
	"mistral-ai":    "mistral",
	"together-ai":   "together_ai",
	"fireworks-ai":  "fireworks_ai",
	"perplexity-ai": "perplexity",
	"x-ai":          "xai",
}

func litellmPrefixFor(slug string) string { return litellmPrefixes[slug] }

// slugFor returns the gateway slug a LiteLLM provider name or key prefix
// stands for, accepting the gateway's own slugs too.
func slugFor(name string) string {
	if s, ok := litellmProviders[name]; ok {
		return s
	}
	if a, ok := providerAliases[name]; ok {
		return a
	}
	for slug := range litellmPrefixes {
		if slug == name {
			return slug
		}
	}
	switch name {
	case "openai", "anthropic", "bedrock", "cohere", "groq", "deepseek", "openrouter", "cerebras", "deepinfra", "sambanova", "nebius", "ollama", "openai-compatible":
		return name
	}
	return ""
}

// entry is one model in LiteLLM's model-price format. Fields the gateway
// does not use (capabilities, per-image prices, max_output_tokens) are
// ignored.
type entry struct {
	Provider   string   `json:"litellm_provider"`
	Mode       string   `json:"mode"`
	Input      *float64 `json:"input_cost_per_token"`
	Output     *float64 `json:"output_cost_per_token"`
	CacheRead  *float64 `json:"cache_read_input_token_cost"`
	CacheWrite *float64 `json:"cache_creation_input_token_cost"`
	Reasoning  *float64 `json:"output_cost_per_reasoning_token"`
	AudioIn    *float64 `json:"input_cost_per_audio_token"`
	AudioOut   *float64 `json:"output_cost_per_audio_token"`
	AudioCache *float64 `json:"cache_read_input_audio_token_cost"`
	BatchIn    *float64 `json:"input_cost_per_token_batches"`
	BatchOut   *float64 `json:"output_cost_per_token_batches"`
	MaxInput   *float64 `json:"max_input_tokens"`
	Source     string   `json:"source"`
	AsOf       string   `json:"as_of"`
}

// Parse reads a price file in LiteLLM's model-price format: an object
// whose keys are model names, possibly prefixed "provider/", and whose
// values carry input_cost_per_token, output_cost_per_token,
// cache_read_input_token_cost, cache_creation_input_token_cost,
// output_cost_per_reasoning_token, input_cost_per_audio_token,
// output_cost_per_audio_token, cache_read_input_audio_token_cost,
// input_cost_per_token_batches,
// output_cost_per_token_batches (US dollars per token), max_input_tokens
// (the context window, window.go) and litellm_provider. The provider is litellm_provider when
// the gateway knows it, else the key's prefix when that names a known
// provider; an entry naming neither matches any provider. Keys starting
// with "_" and LiteLLM's "sample_spec" are skipped, as are the prices of
// entries with neither an input nor an output price (images, audio per
// second, …); their windows are kept. A negative, NaN or infinite price,
// or a window that is not a whole number of tokens, is an error.
func Parse(data []byte) (*Catalog, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("price file larger than %d bytes", MaxFileSize)
	}
	if err := jsonlimit.Object(data); err != nil {
		return nil, fmt.Errorf("price file: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("price file: %w", err)
	}
	c := &Catalog{}
	for key, v := range raw {
		if key == "" || key == "sample_spec" || strings.HasPrefix(key, "_") {
			continue
		}
		var e entry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("price file: model %q: %w", key, err)
		}
		slug := slugFor(e.Provider)
		model := key
		if pre, rest, ok := strings.Cut(key, "/"); ok && rest != "" {
			if s := slugFor(pre); s != "" && (slug == "" || s == slug) {
				slug, model = s, rest
			}
		}
		w, err := e.window()
		if err != nil {
			return nil, fmt.Errorf("price file: model %q: %w", key, err)
		}
		if w > 0 {
			c.putWindow(slug, model, w)
		}
		if e.Input == nil && e.Output == nil {
			continue
		}
		p, err := e.price()
		if err != nil {
			return nil, fmt.Errorf("price file: model %q: %w", key, err)
		}
		c.put(slug, model, p)
	}
	return c, nil
}

func (e *entry) price() (Price, error) {
	var p Price
	for _, f := range []struct {
		v   *float64
		dst *float64
		has *bool
	}{{e.Input, &p.Input, nil}, {e.Output, &p.Output, nil}, {e.CacheRead, &p.CachedInput, &p.HasCachedInput}, {e.CacheWrite, &p.CacheWrite, &p.HasCacheWrite}, {e.Reasoning, &p.Reasoning, &p.HasReasoning},
		{e.AudioIn, &p.AudioInput, &p.HasAudioInput}, {e.AudioOut, &p.AudioOutput, &p.HasAudioOutput}, {e.AudioCache, &p.CachedAudioInput, &p.HasCachedAudioInput},
		{e.BatchIn, &p.BatchInput, &p.HasBatch}, {e.BatchOut, &p.BatchOutput, &p.HasBatch}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0) {
			return Price{}, errors.New("prices must be finite and not negative")
		}
		*f.dst = *f.v
		if f.has != nil {
			*f.has = true
		}
	}
	if (e.BatchIn == nil) != (e.BatchOut == nil) {
		// One batch price alone would price the other kind of token at 0.
		return Price{}, errors.New("input_cost_per_token_batches and output_cost_per_token_batches go together")
	}
	p.Source, p.AsOf = e.Source, e.AsOf
	return p, nil
}

// Load reads the operator's price file at path and returns the built-in
// catalog overridden and extended by it: an entry for a (provider, model)
// the built-in catalog prices replaces it.
func Load(path string) (*Catalog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	over, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return builtin().merge(over), nil
}
