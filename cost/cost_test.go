package cost

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-9*math.Abs(b) }

func TestCostBuiltin(t *testing.T) {
	tests := []struct {
		name, provider, model string
		u                     providers.Usage
		want                  float64
		known                 bool
	}{
		{"openai plain", "openai", "gpt-4o-mini", providers.Usage{PromptTokens: 1000, CompletionTokens: 500}, 1000*0.15e-6 + 500*0.6e-6, true},
		{"openai cached tokens at the cached price only", "openai", "gpt-4o", providers.Usage{PromptTokens: 1000, CachedTokens: 800, CompletionTokens: 10}, 200*2.5e-6 + 800*1.25e-6 + 10*10e-6, true},
		{"openai reasoning billed as output", "openai", "o4-mini", providers.Usage{PromptTokens: 100, CompletionTokens: 1000, ReasoningTokens: 900}, 100*1.1e-6 + 1000*4.4e-6, true},
		{"dated snapshot falls back to family", "openai", "gpt-4o-2024-08-06", providers.Usage{PromptTokens: 1_000_000}, 2.5, true},
		{"listed snapshot keeps its own price", "openai", "gpt-4o-2024-05-13", providers.Usage{PromptTokens: 1_000_000}, 5, true},
		{"neutral alias vendor", "vendor", "gpt-4.1-nano", providers.Usage{CompletionTokens: 1_000_000}, 0.4, true},
		{"azure inherits openai", "azure-openai", "gpt-4o-mini-2024-07-18", providers.Usage{PromptTokens: 1_000_000}, 0.15, true},
		{"anthropic dated key", "anthropic", "claude-3-5-haiku-20241022", providers.Usage{PromptTokens: 2000, CachedTokens: 1000, CompletionTokens: 100}, 1000*0.8e-6 + 1000*0.08e-6 + 100*4e-6, true},
		{"anthropic latest alias", "anthropic", "claude-3-5-sonnet-latest", providers.Usage{PromptTokens: 1_000_000}, 3, true},
		{"bedrock cross-region profile", "bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0", providers.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}, 18, true},
		{"clouda alias", "clouda", "amazon.nova-micro-v1:0", providers.Usage{PromptTokens: 1_000_000}, 0.035, true},
		{"vertex claude at-date", "vertex-ai", "claude-sonnet-4@20250514", providers.Usage{CompletionTokens: 1_000_000}, 15, true},
		{"gemini thoughts in completion, no reasoning price", "google", "gemini-2.5-flash", providers.Usage{PromptTokens: 1000, CompletionTokens: 3000, ReasoningTokens: 2000}, 1000*0.3e-6 + 3000*2.5e-6, true},
		{"gemini models/ prefix", "google", "models/gemini-2.0-flash", providers.Usage{PromptTokens: 1000, CachedTokens: 1000}, 1000 * 0.025e-6, true},
		{"deepseek cache hit", "deepseek", "deepseek-chat", providers.Usage{PromptTokens: 1000, CachedTokens: 600, CompletionTokens: 1000}, 400*0.27e-6 + 600*0.07e-6 + 1000*1.1e-6, true},
		{"provider prefix in model", "openai", "openai/gpt-4o-mini", providers.Usage{PromptTokens: 1_000_000}, 0.15, true},
		{"litellm prefix in model", "together-ai", "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", providers.Usage{PromptTokens: 1_000_000}, 0.88, true},
		{"embedding", "openai", "text-embedding-3-small", providers.Usage{PromptTokens: 1_000_000, TotalTokens: 1_000_000}, 0.02, true},
		{"unknown model is not zero", "openai", "gpt-9-imaginary", providers.Usage{PromptTokens: 10}, 0, false},
		{"model of another provider is unknown", "groq", "gpt-4o", providers.Usage{PromptTokens: 10}, 0, false},
		{"empty model", "openai", "", providers.Usage{PromptTokens: 10}, 0, false},
		{"contradictory counts are clamped", "openai", "gpt-4o", providers.Usage{PromptTokens: 10, CachedTokens: 50, CompletionTokens: 1, ReasoningTokens: 9}, 10*1.25e-6 + 1*10e-6, true},
	}
	c := Builtin()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, known := c.Cost(tt.provider, tt.model, tt.u)
			if known != tt.known || !near(got, tt.want) {
				t.Fatalf("Cost(%q, %q) = %v, %v; want %v, %v", tt.provider, tt.model, got, known, tt.want, tt.known)
			}
		})
	}
}

func TestBuiltinCatalogNotesSourceAndDate(t *testing.T) {
	c := Builtin()
	if c.Len() < 50 {
		t.Fatalf("built-in catalog has %d entries", c.Len())
	}
	for slug, m := range c.byProvider {
		for model, p := range m {
			if !strings.HasPrefix(p.Source, "https://") || len(p.AsOf) != 10 {
				t.Errorf("%s/%s: source %q as_of %q", slug, model, p.Source, p.AsOf)
			}
			if p.Input == 0 && p.Output == 0 {
				t.Errorf("%s/%s: no price", slug, model)
			}
		}
	}
	if len(c.anyProvider) != 0 {
		t.Errorf("built-in entries without a known provider: %v", c.anyProvider)
	}
	for _, slug := range []string{"openai", "anthropic", "google", "vertex-ai", "bedrock", "cohere", "mistral-ai", "groq", "deepseek", "together-ai", "fireworks-ai", "x-ai"} {
		if len(c.byProvider[slug]) == 0 {
			t.Errorf("no built-in prices for %s", slug)
		}
	}
}

const overrideFile = `{
  "sample_spec": {"input_cost_per_token": 1, "litellm_provider": "openai"},
  "gpt-4o": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "litellm_provider": "openai", "mode": "chat"},
  "azure/my-gpt4o-deployment": {"input_cost_per_token": 3e-06, "output_cost_per_token": 4e-06, "cache_read_input_token_cost": 1e-06, "litellm_provider": "azure"},
  "groq/qwen-qwq-32b": {"input_cost_per_token": 2.9e-07, "output_cost_per_token": 3.9e-07, "output_cost_per_reasoning_token": 1e-07},
  "house-model": {"input_cost_per_token": 1e-07, "output_cost_per_token": 1e-07},
  "dall-e-3": {"input_cost_per_pixel": 1e-08, "litellm_provider": "openai", "mode": "image_generation"}
}`

func TestLoadOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(overrideFile), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, provider, model string
		u                     providers.Usage
		want                  float64
		known                 bool
	}{
		{"override replaces builtin", "openai", "gpt-4o", providers.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}, 3, true},
		{"override reaches dated names", "openai", "gpt-4o-2030-11-20", providers.Usage{PromptTokens: 1_000_000}, 1, true},
		{"builtin kept", "openai", "gpt-4o-mini", providers.Usage{PromptTokens: 1_000_000}, 0.15, true},
		{"azure deployment with cache", "azure-openai", "my-gpt4o-deployment", providers.Usage{PromptTokens: 2_000_000, CachedTokens: 1_000_000}, 4, true},
		{"azure inherits the overridden openai price", "azure-openai", "gpt-4o", providers.Usage{PromptTokens: 1_000_000}, 1, true},
		{"key prefix names the provider", "groq", "qwen-qwq-32b", providers.Usage{CompletionTokens: 3_000_000, ReasoningTokens: 2_000_000}, 0.39 + 0.2, true},
		{"entry without provider matches any", "ollama", "house-model", providers.Usage{PromptTokens: 1_000_000}, 0.1, true},
		{"sample_spec skipped", "openai", "sample_spec", providers.Usage{PromptTokens: 1}, 0, false},
		{"image entries skipped", "openai", "dall-e-3", providers.Usage{PromptTokens: 1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, known := c.Cost(tt.provider, tt.model, tt.u)
			if known != tt.known || !near(got, tt.want) {
				t.Fatalf("Cost(%q, %q) = %v, %v; want %v, %v", tt.provider, tt.model, got, known, tt.want, tt.known)
			}
		})
	}
	if _, ok := Builtin().Price("ollama", "house-model"); ok {
		t.Fatal("Load changed the built-in catalog")
	}
}

func TestParseRejects(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	tests := []struct{ name, in, want string }{
		{"not an object", `[1]`, "object"},
		{"invalid JSON", `{"a": `, "not valid json"},
		{"too deep", `{"a": ` + deep + `}`, "nesting"},
		{"negative price", `{"m": {"input_cost_per_token": -1}}`, "negative"},
		{"wrong type", `{"m": {"input_cost_per_token": "cheap"}}`, "model \"m\""},
		{"too large", `{"m": "` + strings.Repeat("x", MaxFileSize) + `"}`, "larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.want) {
				t.Fatalf("Parse error = %v; want it to mention %q", err, tt.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

func TestFormatUSD(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0.000123, "0.000123"},
		{1.5, "1.5"},
		{0, "0"},
		{-1, "0"},
		{math.NaN(), "0"},
		{5e-9, "0.000000005"},
		{12.3456789012345, "12.3456789012"},
		{1e-12, "0"},
		{2.5e-06 * 1000, "0.0025"},
	}
	for _, tt := range tests {
		if got := FormatUSD(tt.in); got != tt.want {
			t.Errorf("FormatUSD(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestHolderSwap(t *testing.T) {
	h := NewHolder(nil)
	if h.Load() != Builtin() {
		t.Fatal("new holder does not serve the built-in catalog")
	}
	over, err := Parse([]byte(`{"x/y": {"input_cost_per_token": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if old := h.Swap(over); old != Builtin() {
		t.Fatal("Swap did not return the previous catalog")
	}
	if _, ok := h.Load().Price("any", "x/y"); !ok {
		t.Fatal("swapped catalog not served")
	}
	h.Swap(nil)
	if h.Load() != Builtin() {
		t.Fatal("Swap(nil) did not restore the built-in catalog")
	}
}

func TestEstimate(t *testing.T) {
	tests := []struct {
		name           string
		p              Price
		prompt, maxOut int64
		want           float64
	}{
		{"output price", Price{Input: 1e-6, Output: 4e-6, CachedInput: 1e-7, HasCachedInput: true}, 1000, 500, 1000*1e-6 + 500*4e-6},
		{"dearer reasoning price", Price{Input: 1e-6, Output: 4e-6, Reasoning: 8e-6, HasReasoning: true}, 10, 10, 10*1e-6 + 10*8e-6},
		{"negative counts", Price{Input: 1, Output: 1}, -5, -5, 0},
	}
	for _, tt := range tests {
		if got := tt.p.Estimate(tt.prompt, tt.maxOut); !near(got, tt.want) {
			t.Errorf("%s: Estimate = %v; want %v", tt.name, got, tt.want)
		}
		// An estimate never falls below the cost of usage within it.
		if got, c := tt.p.Estimate(tt.prompt, tt.maxOut), tt.p.Cost(providers.Usage{PromptTokens: tt.prompt, CompletionTokens: tt.maxOut, ReasoningTokens: tt.maxOut / 2}); got+1e-15 < c {
			t.Errorf("%s: estimate %v below cost %v", tt.name, got, c)
		}
	}
}

func BenchmarkCost(b *testing.B) {
	c := Builtin()
	u := providers.Usage{PromptTokens: 1000, CachedTokens: 200, CompletionTokens: 300}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Cost("bedrock", "us.anthropic.claude-3-5-sonnet-20241022-v2:0", u); !ok {
			b.Fatal("unknown")
		}
	}
}

func TestCostAudio(t *testing.T) {
	withAudio := Price{Input: 4e-6, Output: 16e-6, CachedInput: 0.4e-6, HasCachedInput: true, AudioInput: 32e-6, HasAudioInput: true, AudioOutput: 64e-6, HasAudioOutput: true}
	textOnly := Price{Input: 4e-6, Output: 16e-6, CachedInput: 0.4e-6, HasCachedInput: true}
	mini := Price{Input: 0.6e-6, Output: 2.4e-6, CachedInput: 0.06e-6, HasCachedInput: true, AudioInput: 10e-6, HasAudioInput: true,
		CachedAudioInput: 0.3e-6, HasCachedAudioInput: true, AudioOutput: 20e-6, HasAudioOutput: true}
	u := providers.Usage{PromptTokens: 100, CompletionTokens: 50, CachedTokens: 30}
	for _, tc := range []struct {
		name                       string
		p                          Price
		audioIn, cachedAudio, aOut int64
		want                       float64
	}{
		// 100 in: 40 audio (10 of them cached), 60 text (20 cached); 50 out: 40 audio.
		{"audio prices", withAudio, 40, 10, 40, 30*32e-6 + (100-30-30)*4e-6 + 30*0.4e-6 + 10*16e-6 + 40*64e-6},
		{"no audio prices: as Cost", textOnly, 40, 10, 40, textOnly.Cost(u)},
		{"no audio tokens: as Cost", withAudio, 0, 0, 0, withAudio.Cost(u)},
		{"counts clamped", withAudio, 1000, 1000, 1000, 70*32e-6 + 30*0.4e-6 + 50*64e-6},
		// The mini models: cached audio 0.3e-6, cached text 0.06e-6.
		{"cached audio priced", mini, 40, 10, 40, 30*10e-6 + 10*0.3e-6 + (100-30-30)*0.6e-6 + 20*0.06e-6 + 10*2.4e-6 + 40*20e-6},
	} {
		if got := tc.p.CostAudio(u, tc.audioIn, tc.cachedAudio, tc.aOut); !near(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	c, err := Parse([]byte(`{"gpt-realtime":{"litellm_provider":"openai","input_cost_per_token":4e-6,"output_cost_per_token":16e-6,"input_cost_per_audio_token":32e-6,"output_cost_per_audio_token":64e-6}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := c.Price("openai", "gpt-realtime"); !ok || !p.HasAudioInput || p.AudioInput != 32e-6 || !p.HasAudioOutput || p.AudioOutput != 64e-6 {
		t.Errorf("parsed %+v", p)
	}
}

// TestBuiltinRealtimePrices: the built-in catalog prices the Realtime
// models' audio (realtime.json), dated snapshots included, and reads the
// cached-audio price.
func TestBuiltinRealtimePrices(t *testing.T) {
	for _, tc := range []struct {
		model                     string
		audioIn, cachedAudio, out float64
	}{
		{"gpt-realtime", 32e-6, 0.4e-6, 64e-6},
		{"gpt-realtime-2025-08-28", 32e-6, 0.4e-6, 64e-6},
		{"gpt-realtime-mini", 10e-6, 0.3e-6, 20e-6},
		{"gpt-realtime-2", 32e-6, 0.4e-6, 64e-6},
		{"gpt-4o-realtime-preview", 40e-6, 2.5e-6, 80e-6},
	} {
		p, ok := Builtin().Price("openai", tc.model)
		if !ok || !p.HasAudioInput || !p.HasAudioOutput || !p.HasCachedAudioInput {
			t.Errorf("%s: no audio prices (%v, %+v)", tc.model, ok, p)
			continue
		}
		if !near(p.AudioInput, tc.audioIn) || !near(p.CachedAudioInput, tc.cachedAudio) || !near(p.AudioOutput, tc.out) {
			t.Errorf("%s: audio %v/%v/%v, want %v/%v/%v", tc.model, p.AudioInput, p.CachedAudioInput, p.AudioOutput, tc.audioIn, tc.cachedAudio, tc.out)
		}
	}
}
