package cost

import (
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Cost returns what usage cost on provider's model, in US dollars, and
// whether the model's price is known. It follows the gateway's usage
// conventions (OpenAI's, which every translator keeps):
//
//   - PromptTokens includes CachedTokens and CacheWriteTokens: cached
//     (read) tokens are billed at the cache-read price and cache-write
//     tokens at the cache-write price (each the input price when the
//     catalog has none), the rest at the input price, so no token is
//     billed twice;
//   - CompletionTokens includes ReasoningTokens: reasoning tokens are
//     billed at the reasoning price when the catalog has one, else as
//     output tokens.
//
// Counts that contradict each other (more cached than prompt tokens) are
// clamped rather than producing a negative cost: cache reads first, then
// cache writes, never more than the prompt.
func (c *Catalog) Cost(provider, model string, u providers.Usage) (usd float64, known bool) {
	p, ok := c.Price(provider, model)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}

// Cost returns what usage costs at price p, in US dollars (see
// Catalog.Cost for the rules).
func (p Price) Cost(u providers.Usage) float64 {
	prompt := max(u.PromptTokens, 0)
	cached := min(max(u.CachedTokens, 0), prompt)
	written := min(max(u.CacheWriteTokens, 0), prompt-cached)
	completion := max(u.CompletionTokens, 0)
	reasoning := min(max(u.ReasoningTokens, 0), completion)

	cachedPrice := p.Input
	if p.HasCachedInput {
		cachedPrice = p.CachedInput
	}
	writePrice := p.Input
	if p.HasCacheWrite {
		writePrice = p.CacheWrite
	}
	reasoningPrice := p.Output
	if p.HasReasoning {
		reasoningPrice = p.Reasoning
	}
	return float64(prompt-cached-written)*p.Input +
		float64(cached)*cachedPrice +
		float64(written)*writePrice +
		float64(completion-reasoning)*p.Output +
		float64(reasoning)*reasoningPrice
}

// CostAudio returns what usage costs at price p when some of its tokens
// are audio (a Realtime response): audioIn of the prompt tokens are
// audio, cachedAudio of those read from the cache, and audioOut of the
// completion tokens. Uncached audio input costs AudioInput, cached audio
// CachedAudioInput and audio output AudioOutput when the catalog has
// them; everything else (cached audio without its own price included:
// most OpenAI realtime models price it as cached text) is priced as Cost
// prices it. Counts are clamped as Cost clamps them.
func (p Price) CostAudio(u providers.Usage, audioIn, cachedAudio, audioOut int64) float64 {
	prompt := max(u.PromptTokens, 0)
	audioIn = min(max(audioIn, 0), prompt)
	cachedAudio = min(max(cachedAudio, 0), audioIn, max(u.CachedTokens, 0))
	audioOut = min(max(audioOut, 0), max(u.CompletionTokens, 0))
	var extra float64
	text := u
	if p.HasAudioInput {
		billed := audioIn - cachedAudio
		text.PromptTokens -= billed
		extra += float64(billed) * p.AudioInput
	}
	if p.HasCachedAudioInput {
		text.PromptTokens -= cachedAudio
		text.CachedTokens = max(text.CachedTokens, 0) - cachedAudio
		extra += float64(cachedAudio) * p.CachedAudioInput
	}
	if p.HasAudioOutput {
		text.CompletionTokens -= audioOut
		text.ReasoningTokens = min(text.ReasoningTokens, text.CompletionTokens)
		extra += float64(audioOut) * p.AudioOutput
	}
	return p.Cost(text) + extra
}

// Estimate returns the most a request can cost before it is sent:
// promptTokens at the input price (no cache discount and no cache write
// assumed: whether a prompt is written to the cache is known only from
// the answer, and the settlement charges it) and up to
// maxOutputTokens at the dearer of the output and reasoning prices. A
// spend limit reserves this at admission and settles on Cost once the
// usage is known, as token limits do.
func (p Price) Estimate(promptTokens, maxOutputTokens int64) float64 {
	out := p.Output
	if p.HasReasoning && p.Reasoning > out {
		out = p.Reasoning
	}
	return float64(max(promptTokens, 0))*p.Input + float64(max(maxOutputTokens, 0))*out
}

// HeaderPrecision is the number of decimals FormatUSD keeps: a
// hundred-millionth of a cent, below the cheapest token any catalog
// entry prices.
const HeaderPrecision = 10

// FormatUSD formats a cost for the x-gateway-cost header: plain decimal
// US dollars, no exponent, at most HeaderPrecision decimals, trailing
// zeros removed ("0.000123", "1.5", "0").
func FormatUSD(usd float64) string {
	if usd <= 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return "0"
	}
	s := strconv.FormatFloat(usd, 'f', HeaderPrecision, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "0"
	}
	return s
}

// Holder holds the catalog in use, swapped atomically when the operator's
// file changes or the configuration reloads; readers never lock. The app
// owns one Holder, so the catalog survives reloads that do not touch it.
type Holder struct {
	p atomic.Pointer[Catalog]
}

// NewHolder returns a holder serving c, or the built-in catalog when c is
// nil.
func NewHolder(c *Catalog) *Holder {
	h := &Holder{}
	h.Swap(c)
	return h
}

// Load returns the catalog in use.
func (h *Holder) Load() *Catalog {
	if c := h.p.Load(); c != nil {
		return c
	}
	return builtin()
}

// Swap installs c (the built-in catalog when nil) and returns the
// catalog it replaces.
func (h *Holder) Swap(c *Catalog) *Catalog {
	if c == nil {
		c = builtin()
	}
	return h.p.Swap(c)
}
