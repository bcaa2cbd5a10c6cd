// Package ledger is the gateway's usage ledger: one durable record per
// finished request (and per managed batch line) with who made it, what it
// used and what it cost, never what was asked or answered. Records are
// queued on the request path without blocking and written in batches by
// one writer per store, to SQLite (embedded, pure Go) or PostgreSQL (a
// cluster's shared ledger). The analytics, logs and usage APIs read it.
package ledger

import (
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// Bounds on what a record keeps of fields an outsider controls (model
// names, metadata): a record's size stays bounded whatever a client sends.
const (
	// MaxField is the longest string field kept, in bytes.
	MaxField = 256
	// MaxMetadataPairs, MaxMetadataKey and MaxMetadataValue bound the
	// metadata kept: the first pairs by key order, keys and values cut to
	// these byte lengths.
	MaxMetadataPairs = 32
	MaxMetadataKey   = 128
	MaxMetadataValue = 512
)

// NanoUSD is the number of units a record's cost counts per US dollar:
// nano-dollars keep the sum of many records equal to the sum of the
// x-gateway-cost headers (ten decimals) to well below a micro-dollar.
const NanoUSD = 1_000_000_000

// Record is one finished request as the ledger keeps it.
type Record struct {
	// ID is assigned by the store; 0 on a record not yet written.
	ID int64 `json:"id"`
	// Time is when the request finished.
	Time         time.Time `json:"time"`
	TraceID      string    `json:"trace_id"`
	APIKey       string    `json:"api_key"`
	Workspace    string    `json:"workspace_id"`
	Organisation string    `json:"organisation_id"`
	VirtualKey   string    `json:"virtual_key,omitempty"`
	ConfigID     string    `json:"config_id,omitempty"`
	Provider     string    `json:"provider"`
	Model        string    `json:"model"`
	Operation    string    `json:"operation"`
	Status       int       `json:"status"`
	Stream       bool      `json:"stream"`
	// Token counts by kind.
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	// CostNanoUSD is the cost in nano-dollars when CostKnown; a request
	// with usage on an unpriced model has CostKnown false.
	CostNanoUSD int64 `json:"cost_nano_usd"`
	CostKnown   bool  `json:"cost_known"`
	// Latency is from the request's start to its end; TTFT to the first
	// response byte (0 when none was sent).
	Latency    time.Duration `json:"-"`
	TTFT       time.Duration `json:"-"`
	CacheState string        `json:"cache_status,omitempty"`
	// Retries is the number of upstream attempts after the first.
	Retries  int               `json:"retries"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// BatchID and CustomID name the managed batch line the record is
	// (empty for other requests). The ledger keeps at most one record
	// per line: a second is ignored (see Store.Insert).
	BatchID  string `json:"batch_id,omitempty"`
	CustomID string `json:"custom_id,omitempty"`
	// Estimated marks tokens and cost estimated by the gateway: a stream
	// that ended before the provider reported its usage.
	Estimated bool `json:"estimated,omitempty"`
	// ErrorType is the class of the provider's error answer the client
	// got (providers.ErrorClass: context_length_exceeded, rate_limited,
	// …), empty when it got none; the log entry's error_type.
	ErrorType string `json:"error_type,omitempty"`
}

// TotalTokens is input plus output tokens.
func (r *Record) TotalTokens() int64 { return r.InputTokens + r.OutputTokens }

// CacheHit reports whether the answer came from the gateway's cache.
func (r *Record) CacheHit() bool { return cache.IsHit(r.CacheState) }

// FromEntry fills r from a finished request's log entry, as of now. It
// keeps e's metadata map when it is within bounds (the entry is done with
// it), so a typical request copies no map.
func (r *Record) FromEntry(e *observe.Entry, now time.Time) {
	*r = Record{
		Time:         now,
		TraceID:      bound(e.TraceID),
		APIKey:       bound(e.KeyName),
		Workspace:    bound(e.Workspace),
		Organisation: bound(e.Organisation),
		VirtualKey:   bound(e.VirtualKey),
		ConfigID:     bound(e.ConfigID),
		Provider:     bound(e.Provider),
		Model:        bound(e.Model),
		Operation:    bound(string(e.Operation)),
		Status:       e.Status,
		Stream:       e.Stream,
		CacheState:   bound(e.CacheState),
		Latency:      now.Sub(e.Start),
		Metadata:     boundMetadata(e.Metadata),
		BatchID:      bound(e.BatchID),
		CustomID:     bound(e.CustomID),
		Estimated:    e.UsageEstimated && e.Usage != nil,
		ErrorType:    bound(e.ErrorType),
	}
	if !e.FirstByte.IsZero() {
		r.TTFT = e.FirstByte.Sub(e.Start)
	}
	if n := len(e.Attempts); n > 1 {
		r.Retries = n - 1
	}
	if u := e.Usage; u != nil {
		r.InputTokens, r.OutputTokens = u.PromptTokens, u.CompletionTokens
		r.CachedTokens, r.CacheWriteTokens, r.ReasoningTokens = u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens
		r.CostKnown = e.CostKnown
		if e.CostKnown {
			r.CostNanoUSD = NanoFromUSD(e.CostUSD)
		}
	} else {
		// No usage: nothing was charged.
		r.CostKnown = true
	}
}

// NanoFromUSD converts dollars to whole nano-dollars, rounding to the
// nearest; a value that is not a finite non-negative number is 0.
func NanoFromUSD(usd float64) int64 {
	if usd <= 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return 0
	}
	v := math.Round(usd * NanoUSD)
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// bound cuts s to MaxField bytes at a character boundary.
func bound(s string) string { return cut(s, MaxField) }

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// boundMetadata returns m itself when it is within bounds, else a copy of
// its first MaxMetadataPairs pairs by key with keys and values cut.
func boundMetadata(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	within := len(m) <= MaxMetadataPairs
	if within {
		for k, v := range m {
			if len(k) > MaxMetadataKey || len(v) > MaxMetadataValue {
				within = false
				break
			}
		}
	}
	if within {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]string, min(len(keys), MaxMetadataPairs))
	for _, k := range keys {
		if len(out) == MaxMetadataPairs {
			break
		}
		out[cut(k, MaxMetadataKey)] = cut(m[k], MaxMetadataValue)
	}
	return out
}
