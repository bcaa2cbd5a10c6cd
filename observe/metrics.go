package observe

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	cachestatus "github.com/caddy-llm-gateway/caddy-llm-gateway/cache/status"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// Collectors are created once per process and registered into every
// config's registry: Caddy builds a new registry for each config load, and
// re-registering the same collectors keeps counters monotonic across
// reloads (research/caddy.md §4.3).
//
// Labels never carry keys; the only tenant label is the cost counter's
// workspace id, bounded like models. Every label value comes from a
// bounded set: operations and outcomes are enums, providers are registered
// slugs, and model names are bounded as labels.go describes (configured
// and priced models, everything else "_other"); the model label is also
// recorded only for answers a provider accepted.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_requests_total",
		Help: "Requests answered by llm_gateway, by provider, endpoint and status code.",
	}, []string{"provider", "endpoint", "code"})
	attemptsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_attempts_total",
		Help: "Attempts per target, by provider and outcome (ok, cache_hit, retry, fallback, breaker_open, timeout, unreachable, error, …).",
	}, []string{"provider", "outcome"})
	collectors = metricset.Declare(requestsTotal, attemptsTotal, refusalsTotal)

	requestsByLabels = counters(requestsTotal, 3)
	attemptsByLabels = counters(attemptsTotal, 2)
)

// codeLabels are the status codes' label values, made once: strconv.Itoa
// allocates for numbers past 99.
var codeLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func codeLabel(code int) string {
	if code >= 0 && code < len(codeLabels) {
		return codeLabels[code]
	}
	return strconv.Itoa(code)
}

// RegisterMetrics registers the gateway's collectors, the GenAI ones of
// genai_metrics.go included, into reg, which may already hold them from
// an earlier load.
func RegisterMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	if err := RegisterGenAIMetrics(reg); err != nil {
		return err
	}
	return metricset.Register(reg, collectors)
}

// record adds the entry to the request metrics. Control-plane requests
// (no provider) are counted under provider "gateway". The per-attempt
// GenAI durations are recorded by the attempts themselves (RecordGenAI);
// the request's tokens and cost are recorded here, once, from the usage
// of the answer the client got, for answers a provider accepted and that
// did not come from the cache.
func (e *Entry) record(time.Time) {
	provider := e.Provider
	if provider == "" {
		provider = "gateway"
	}
	provider = providerLabel(provider)
	requestsByLabels.with(labelKey{provider, string(e.Operation), codeLabel(e.Status)}).Inc()
	if e.Refusal != "" {
		RecordRefusal(e.Refusal)
	}
	for _, a := range e.Attempts {
		attemptsByLabels.with(labelKey{providerLabel(a.Provider), a.Outcome}).Inc()
		switch a.Outcome {
		case "retry":
			RecordRetry(providerLabel(a.Provider))
		case "fallback":
			RecordFallback(providerLabel(a.Provider))
		}
	}
	RecordCacheLookup(e.Operation, e.CacheState)
	if e.Usage == nil || e.Status < 200 || e.Status >= 300 || cachestatus.IsHit(e.CacheState) || provider == "gateway" || provider == OtherLabel {
		return
	}
	recordUsage(defaultBounds, OperationName(e.Operation), ProviderName(provider), Models.Bound(e.Model), e.Workspace, e.Usage, e.CostUSD, e.CostKnown)
}
