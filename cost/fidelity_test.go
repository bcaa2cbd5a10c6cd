package cost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestPublishedPrices spot-checks the generated catalog against the
// vendors' published list prices (US dollars per million tokens, standard
// tier, as on their pricing pages), so a regeneration that misreads the
// database (units, tiers, dated variants) or maps a model to the wrong
// entry fails here. 0 means the vendor publishes no such price.
func TestPublishedPrices(t *testing.T) {
	tests := []struct {
		provider, model                      string
		input, cacheRead, cacheWrite, output float64
	}{
		{"openai", "gpt-4o", 2.5, 1.25, 0, 10},
		{"openai", "gpt-4o-mini", 0.15, 0.075, 0, 0.6},
		{"openai", "o3-mini", 1.1, 0.55, 0, 4.4},
		{"anthropic", "claude-sonnet-4-5", 3, 0.3, 3.75, 15},
		{"anthropic", "claude-haiku-4-5", 1, 0.1, 1.25, 5},
		{"anthropic", "claude-opus-4-5", 5, 0.5, 6.25, 25},
		{"google", "gemini-2.5-pro", 1.25, 0.125, 0, 10},
		{"google", "gemini-2.5-flash", 0.3, 0.03, 0, 2.5},
		{"mistral-ai", "mistral-large-latest", 2, 0, 0, 6},
		{"cohere", "command-r", 0.15, 0, 0, 0.6},
		{"bedrock", "amazon.nova-pro-v1:0", 0.8, 0.2, 0, 3.2},
		{"bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0", 3, 0.3, 3.75, 15},
	}
	c := Builtin()
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.model, func(t *testing.T) {
			p, ok := c.Price(tt.provider, tt.model)
			if !ok {
				t.Fatal("not priced")
			}
			m := func(v float64) float64 { return v * 1e6 }
			if !near(m(p.Input), tt.input) || !near(m(p.Output), tt.output) {
				t.Errorf("input/output = %v/%v per million; published %v/%v", m(p.Input), m(p.Output), tt.input, tt.output)
			}
			if tt.cacheRead != 0 && (!p.HasCachedInput || !near(m(p.CachedInput), tt.cacheRead)) {
				t.Errorf("cache read = %v (%v); published %v", m(p.CachedInput), p.HasCachedInput, tt.cacheRead)
			}
			if tt.cacheWrite != 0 && (!p.HasCacheWrite || !near(m(p.CacheWrite), tt.cacheWrite)) {
				t.Errorf("cache write = %v (%v); published %v", m(p.CacheWrite), p.HasCacheWrite, tt.cacheWrite)
			}
		})
	}
}

// TestAliasesPriced: the names callers and providers use for a model
// (Anthropic's undated aliases, which the answer repeats; "-latest"
// aliases; Bedrock in-region and cross-region ids; Vertex's @date form;
// Fireworks' account path) cost what the model costs, and the alias rules
// do not reach names they were not written for.
func TestAliasesPriced(t *testing.T) {
	tests := []struct {
		provider, model, sameAs string // sameAs "" means unknown
	}{
		{"anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929"},
		{"anthropic", "claude-haiku-4-5", "claude-haiku-4-5-20251001"},
		{"anthropic", "claude-opus-4-5", "claude-opus-4-5-20251101"},
		{"anthropic", "claude-3-5-sonnet-latest", "claude-3-5-sonnet-20241022"},
		{"anthropic", "claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219"},
		{"vertex-ai", "claude-sonnet-4-5@20250929", "claude-sonnet-4-5"},
		{"bedrock", "anthropic.claude-haiku-4-5-20251001-v1:0", "us.anthropic.claude-haiku-4-5-20251001-v1:0"},
		{"fireworks-ai", "accounts/fireworks/models/deepseek-v3p2", "deepseek-v3p2"},
		{"mistral-ai", "mistral-large-latest", "mistral-large"},
		{"openai", "gpt-4o-v1:0", ""}, // the version rule is Bedrock's only
		{"anthropic", "-latest", ""},
	}
	c := Builtin()
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.model, func(t *testing.T) {
			p, ok := c.Price(tt.provider, tt.model)
			if tt.sameAs == "" {
				if ok {
					t.Fatalf("priced %+v; want unknown", p)
				}
				return
			}
			want, wok := c.Price(tt.provider, tt.sameAs)
			if !ok || !wok || p.Input != want.Input || p.Output != want.Output || p.CacheWrite != want.CacheWrite || p.CachedInput != want.CachedInput {
				t.Fatalf("%+v (%v); want %s's %+v (%v)", p, ok, tt.sameAs, want, wok)
			}
		})
	}
}

// TestCachePricing: cache reads and cache writes, which usage reports as
// part of the prompt, are each billed at their own rate, once.
func TestCachePricing(t *testing.T) {
	sonnet := Price{Input: 3e-6, Output: 15e-6, CachedInput: 0.3e-6, HasCachedInput: true, CacheWrite: 3.75e-6, HasCacheWrite: true}
	noWrite := Price{Input: 3e-6, Output: 15e-6}
	cw := providers.Usage{PromptTokens: 1130, CachedTokens: 100, CacheWriteTokens: 1000, CompletionTokens: 12}
	tests := []struct {
		name string
		p    Price
		u    providers.Usage
		want float64
	}{
		{"write and read at their rates", sonnet, cw, 30*3e-6 + 100*0.3e-6 + 1000*3.75e-6 + 12*15e-6},
		{"no cache-write price: input price", noWrite, cw, 1130*3e-6 + 12*15e-6},
		{"writes beyond the prompt are clamped", sonnet, providers.Usage{PromptTokens: 500, CachedTokens: 100, CacheWriteTokens: 1000}, 100*0.3e-6 + 400*3.75e-6},
		{"negative writes ignored", sonnet, providers.Usage{PromptTokens: 10, CacheWriteTokens: -5}, 10 * 3e-6},
	}
	for _, tt := range tests {
		if got := tt.p.Cost(tt.u); !near(got, tt.want) {
			t.Errorf("%s: Cost = %v; want %v", tt.name, got, tt.want)
		}
	}

	// The same through the built-in catalog, per provider.
	catalog := []struct {
		name, provider, model string
		u                     providers.Usage
		want                  float64
	}{
		{"anthropic cache write", "anthropic", "claude-sonnet-4-5", cw, 0.00405},
		{"bedrock in-region cache write", "bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", cw, 30*3.3e-6 + 100*0.33e-6 + 1000*4.125e-6 + 12*16.5e-6},
		{"bedrock global cache write", "bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0", cw, 0.00405},
		{"vertex claude cache write", "vertex-ai", "claude-sonnet-4-5@20250929", cw, 0.00405},
		{"gemini cached content", "google", "gemini-2.5-flash", providers.Usage{PromptTokens: 1000, CachedTokens: 800, CompletionTokens: 10}, 200*0.3e-6 + 800*0.03e-6 + 10*2.5e-6},
		{"vertex gemini cached content", "vertex-ai", "gemini-2.5-pro", providers.Usage{PromptTokens: 1000, CachedTokens: 800}, 200*1.25e-6 + 800*0.125e-6},
	}
	c := Builtin()
	for _, tt := range catalog {
		got, ok := c.Cost(tt.provider, tt.model, tt.u)
		if !ok || !near(got, tt.want) {
			t.Errorf("%s: Cost(%q, %q) = %v, %v; want %v", tt.name, tt.provider, tt.model, got, ok, tt.want)
		}
	}
}

// TestOverrideCacheWrite: an operator's file prices cache writes with
// LiteLLM's cache_creation_input_token_cost.
func TestOverrideCacheWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(`{"anthropic/house-claude": {"litellm_provider": "anthropic", "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "cache_creation_input_token_cost": 4e-06, "cache_read_input_token_cost": 1e-07}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c.Cost("anthropic", "house-claude", providers.Usage{PromptTokens: 1_000_000, CachedTokens: 250_000, CacheWriteTokens: 250_000})
	if want := 0.5*1 + 0.25*0.1 + 0.25*4; !ok || !near(got, want) {
		t.Fatalf("Cost = %v, %v; want %v", got, ok, want)
	}
	if _, err := Parse([]byte(`{"m": {"input_cost_per_token": 1, "cache_creation_input_token_cost": -1}}`)); err == nil {
		t.Fatal("negative cache-write price accepted")
	}
}

// BenchmarkCostAlias prices a name found only through the alias rules
// (region prefix, version and date removed), the slowest lookup path.
func BenchmarkCostAlias(b *testing.B) {
	c := Builtin()
	u := providers.Usage{PromptTokens: 1130, CachedTokens: 100, CacheWriteTokens: 1000, CompletionTokens: 12}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Cost("bedrock", "eu.anthropic.claude-sonnet-4-5-20250929-v2:0", u); !ok {
			b.Fatal("unknown")
		}
	}
}

// BenchmarkParseBuiltin is the one-time cost of reading the embedded
// catalog at start-up.
func BenchmarkParseBuiltin(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(builtinJSON); err != nil {
			b.Fatal(err)
		}
	}
}
