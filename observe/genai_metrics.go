package observe

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	cachestatus "github.com/caddy-llm-gateway/caddy-llm-gateway/cache/status"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// The GenAI client metrics follow the OpenTelemetry GenAI conventions
// v1.41 (research/wave2.md §4.2) with the names, units and buckets the
// OTel Prometheus exporter would give them: dots become underscores, the
// unit "s" becomes the "_seconds" suffix, "{token}" adds none, and each
// attribute becomes a label of the same name with underscores
// (gen_ai.operation.name → gen_ai_operation_name, error.type →
// error_type). Attribute values are the conventions' (OperationName,
// ProviderName). gen_ai.response.model and server.address are left out
// of the labels: they are not required and would multiply the series.
//
// The gateway's own counters are named llm_gateway_*, like
// llm_gateway_requests_total, with Prometheus units (_usd, _total).
//
// One observation per upstream attempt: every attempt is a client
// operation of its own, so retries and fallbacks show as extra
// durations with an error_type, while tokens and cost come only from the
// attempt whose usage the provider reported.
var (
	// genaiDurationBuckets and genaiTokenBuckets are the conventions'
	// explicit bucket boundaries.
	genaiDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	genaiTokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

	genaiLabels = []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}

	genaiOperationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_duration_seconds",
		Help:    "Duration of each upstream GenAI operation (gen_ai.client.operation.duration); error_type is set on failures.",
		Buckets: genaiDurationBuckets,
	}, append(genaiLabels[:3:3], "error_type"))
	genaiTimeToFirstChunk = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_time_to_first_chunk_seconds",
		Help:    "Time from sending a streaming request to receiving its first chunk (gen_ai.client.operation.time_to_first_chunk).",
		Buckets: genaiDurationBuckets,
	}, genaiLabels)
	genaiTokenUsage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_token_usage",
		Help:    "Tokens per operation as the provider reported them, by gen_ai_token_type input or output (gen_ai.client.token.usage).",
		Buckets: genaiTokenBuckets,
	}, append(genaiLabels[:3:3], "gen_ai_token_type"))

	costTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_cost_usd_total",
		Help: "Cost of the requests the gateway served, in US dollars, priced from the catalog and the usage providers reported.",
	}, append(genaiLabels[1:3:3], "workspace"))
	costUnknownTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_cost_unknown_total",
		Help: "Answers with usage whose model has no price in the catalog (their cost is unknown, not zero).",
	}, genaiLabels[1:3])
	cacheLookupsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_cache_lookups_total",
		Help: "Response cache lookups by cache_status (hit, miss, semantic_hit, semantic_miss, refresh).",
	}, []string{"gen_ai_operation_name", "cache_status"})
	retriesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_retries_total",
		Help: "Upstream calls retried on the same target, by the provider that failed.",
	}, []string{"gen_ai_provider_name"})
	fallbacksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_fallbacks_total",
		Help: "Moves to the next target of a fallback strategy, by the provider that failed.",
	}, []string{"gen_ai_provider_name"})
	breakerTransitionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_circuit_breaker_transitions_total",
		Help: "Circuit breaker state changes, by provider and the state entered (open, half_open, closed).",
	}, []string{"gen_ai_provider_name", "state"})
	breakersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "llm_gateway_circuit_breakers",
		Help: "Circuit breakers currently open or half-open, by provider and state.",
	}, []string{"gen_ai_provider_name", "state"})
	guardrailVerdictsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_guardrail_verdicts_total",
		Help: "Guardrail check results, by stage (input, output), check and verdict (pass, fail, error).",
	}, []string{"stage", "check", "verdict"})

	genaiCollectors = metricset.Declare(
		genaiOperationDuration, genaiTimeToFirstChunk, genaiTokenUsage,
		costTotal, costUnknownTotal, cacheLookupsTotal, retriesTotal, fallbacksTotal,
		breakerTransitionsTotal, breakersGauge, guardrailVerdictsTotal,
	)

	// The children every answered request records (children.go).
	genaiDurationByLabels = observers(genaiOperationDuration, 4)
	ttfcByLabels          = observers(genaiTimeToFirstChunk, 3)
	tokensByLabels        = observers(genaiTokenUsage, 4)
	costByLabels          = counters(costTotal, 3)
	costUnknownByLabels   = counters(costUnknownTotal, 2)
	cacheLookupsByLabels  = counters(cacheLookupsTotal, 2)
)

// RegisterGenAIMetrics registers the GenAI and gateway collectors of this
// file into reg (Caddy's per-load registry), which may already hold them
// from an earlier load. The collectors are created once per process, so
// counters stay monotonic across reloads.
func RegisterGenAIMetrics(reg prometheus.Registerer) error {
	return metricset.Register(reg, genaiCollectors)
}

// LabelBounds holds the bounds the caller applies to caller-chosen label
// values. A nil Model keeps model names (truncated to 128 bytes); a nil
// Workspace records no workspace. A nil *LabelBounds applies the process's
// Models and Workspaces.
type LabelBounds struct {
	Model     *LabelSet
	Workspace *LabelSet
}

// GenAIRecord is one upstream attempt, as RecordGenAI records it.
type GenAIRecord struct {
	Operation providers.Operation
	// Provider is the gateway slug; the label is its ProviderName.
	Provider string
	// Model is the requested model.
	Model     string
	Workspace string
	Duration  time.Duration
	// TimeToFirstChunk is set for streams that delivered a chunk.
	TimeToFirstChunk time.Duration
	// ErrorType is empty on success, else error.type (see ErrorType).
	ErrorType string
	// Usage is what the provider reported, nil when it reported none.
	Usage *providers.Usage
	// CostUSD is the attempt's cost when CostKnown; with Usage set and
	// CostKnown false the attempt counts as unpriced.
	CostUSD   float64
	CostKnown bool
}

// RecordGenAI records one upstream attempt in the GenAI metrics and the
// cost counters. Label values are bounded by b.
func RecordGenAI(b *LabelBounds, r *GenAIRecord) {
	if b == nil {
		b = defaultBounds
	}
	op := OperationName(r.Operation)
	provider := ProviderName(r.Provider)
	model := b.Model.Bound(r.Model)

	genaiDurationByLabels.with(labelKey{op, provider, model, r.ErrorType}).Observe(r.Duration.Seconds())
	if r.TimeToFirstChunk > 0 {
		ttfcByLabels.with(labelKey{op, provider, model}).Observe(r.TimeToFirstChunk.Seconds())
	}
	if r.Usage != nil {
		recordUsage(b, op, provider, model, r.Workspace, r.Usage, r.CostUSD, r.CostKnown)
	}
}

// recordUsage records the tokens and the cost of an answer with usage;
// model is already bounded.
func recordUsage(b *LabelBounds, op, provider, model, workspace string, u *providers.Usage, usd float64, known bool) {
	tokensByLabels.with(labelKey{op, provider, model, "input"}).Observe(float64(u.PromptTokens))
	tokensByLabels.with(labelKey{op, provider, model, "output"}).Observe(float64(u.CompletionTokens))
	if !known {
		costUnknownByLabels.with(labelKey{provider, model}).Inc()
		return
	}
	ws := ""
	if b.Workspace != nil {
		ws = b.Workspace.Bound(workspace)
	}
	if usd > 0 {
		costByLabels.with(labelKey{provider, model, ws}).Add(usd)
	}
}

// cacheStatusLabels maps the x-gateway-cache-status values (cache
// package) to label values.
var cacheStatusLabels = map[string]string{
	cachestatus.Hit:          "hit",
	cachestatus.Miss:         "miss",
	cachestatus.Refresh:      "refresh",
	cachestatus.SemanticHit:  "semantic_hit",
	cachestatus.SemanticMiss: "semantic_miss",
}

// RecordCacheLookup counts a response cache lookup by its
// x-gateway-cache-status value; DISABLED and unknown values are not
// lookups and are ignored.
func RecordCacheLookup(op providers.Operation, status string) {
	if l, ok := cacheStatusLabels[status]; ok {
		cacheLookupsByLabels.with(labelKey{OperationName(op), l}).Inc()
	}
}

// RecordRetry counts a retry of an upstream call to provider (a slug).
func RecordRetry(provider string) {
	retriesTotal.WithLabelValues(ProviderName(provider)).Inc()
}

// RecordFallback counts a move past a failed target of provider (a slug).
func RecordFallback(provider string) {
	fallbacksTotal.WithLabelValues(ProviderName(provider)).Inc()
}

// breakerState normalises gobreaker's state names.
func breakerState(s string) string {
	switch s {
	case "open":
		return "open"
	case "half-open", "half_open":
		return "half_open"
	}
	return "closed"
}

// RecordBreakerTransition records a circuit breaker of provider (a slug)
// moving between gobreaker states ("closed", "half-open", "open"): a
// transition counter and the number of breakers open or half-open. A
// breaker is born closed and removed only while closed, so the gauge
// needs no other events.
func RecordBreakerTransition(provider, from, to string) {
	p := ProviderName(provider)
	from, to = breakerState(from), breakerState(to)
	if from == to {
		return
	}
	breakerTransitionsTotal.WithLabelValues(p, to).Inc()
	if from != "closed" {
		breakersGauge.WithLabelValues(p, from).Dec()
	}
	if to != "closed" {
		breakersGauge.WithLabelValues(p, to).Inc()
	}
}

// RecordGuardrailVerdict counts a guardrail check's result. stage is
// "input" or "output"; check is the configured check's id or type (a
// bounded, configured set); verdict is "pass", "fail" or "error".
func RecordGuardrailVerdict(stage, check, verdict string) {
	switch verdict {
	case "pass", "fail", "error":
	default:
		verdict = "error"
	}
	guardrailVerdictsTotal.WithLabelValues(stage, truncLabel(check), verdict).Inc()
}
