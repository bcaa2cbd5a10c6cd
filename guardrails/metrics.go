package guardrails

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// asyncDropped counts async hook runs the pool dropped. Like the
// gateway's other collectors it is created once per process and
// registered into every config's registry, so it stays monotonic across
// reloads; its only label is a fixed set of reasons.
var asyncDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "llm_gateway_async_hooks_dropped_total",
	Help: "Async hook runs dropped because the async hook pool's queue was full or the pool had stopped, by reason (queue_full, stopped).",
}, []string{"reason"})

func recordAsyncDrop(reason string) { asyncDropped.WithLabelValues(reason).Inc() }

// RegisterMetrics registers the guardrails collectors into reg (a
// config's registry), which may already hold them from an earlier load.
func RegisterMetrics(reg prometheus.Registerer) error {
	return metricset.Register(reg, guardrailCollectors)
}

var guardrailCollectors = metricset.Declare(asyncDropped)
