package observe

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors are created once per process and registered into every
// config's registry: Caddy builds a new registry for each config load, and
// re-registering the same collectors keeps counters monotonic across
// reloads (research/caddy.md §4.3).
//
// Labels never carry keys or tenants. Every label value comes from a
// bounded set: operations and outcomes are enums, providers are registered
// slugs, and model names are bounded as labels.go describes (configured
// models, then the first MaxSeenModels seen, then "_other"); the model
// label is also recorded only for answers a provider accepted.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304}

	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_requests_total",
		Help: "Requests answered by llm_gateway, by provider, endpoint and status code.",
	}, []string{"provider", "endpoint", "code"})
	attemptsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_attempts_total",
		Help: "Attempts per target, by provider and outcome (ok, cache_hit, retry, fallback, breaker_open, timeout, unreachable, error, …).",
	}, []string{"provider", "outcome"})
	operationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_duration_seconds",
		Help:    "Duration of LLM operations through the gateway (OpenTelemetry GenAI gen_ai.client.operation.duration).",
		Buckets: durationBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_provider_name", "error_type"})
	timeToFirstChunk = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_operation_time_to_first_chunk_seconds",
		Help:    "Time to the first streamed chunk (gen_ai.client.operation.time_to_first_chunk).",
		Buckets: durationBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_provider_name"})
	tokenUsage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_token_usage",
		Help:    "Tokens used per request as the provider reported them (gen_ai.client.token.usage).",
		Buckets: tokenBuckets,
	}, []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_token_type"})

	collectors = []prometheus.Collector{requestsTotal, attemptsTotal, operationDuration, timeToFirstChunk, tokenUsage}
)

// RegisterMetrics registers the gateway's collectors into reg, which may
// already hold them from an earlier load.
func RegisterMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// record adds the entry to the metrics. Control-plane requests (no
// provider) are counted under provider "gateway".
func (e *Entry) record(now time.Time) {
	provider := e.Provider
	if provider == "" {
		provider = "gateway"
	}
	provider = providerLabel(provider)
	op := string(e.Operation)
	requestsTotal.WithLabelValues(provider, op, strconv.Itoa(e.Status)).Inc()
	for _, a := range e.Attempts {
		attemptsTotal.WithLabelValues(providerLabel(a.Provider), a.Outcome).Inc()
	}
	errType := ""
	if e.Status >= 400 || e.Status == 0 {
		errType = strconv.Itoa(e.Status)
	}
	operationDuration.WithLabelValues(op, provider, errType).Observe(now.Sub(e.Start).Seconds())
	if e.Stream && !e.FirstByte.IsZero() {
		timeToFirstChunk.WithLabelValues(op, provider).Observe(e.FirstByte.Sub(e.Start).Seconds())
	}
	if e.Usage != nil && e.Status >= 200 && e.Status < 300 {
		model := models.label(e.Model)
		tokenUsage.WithLabelValues(op, provider, model, "input").Observe(float64(e.Usage.PromptTokens))
		tokenUsage.WithLabelValues(op, provider, model, "output").Observe(float64(e.Usage.CompletionTokens))
	}
}
