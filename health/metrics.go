package health

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// storeUp is the state of each shared store as readiness last saw it. It
// is created once per process and registered into every config's
// registry, as the gateway's other collectors are; the store label is one
// of the package's store names, so its set is bounded.
var storeUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "llm_gateway_store_up",
	Help: "Whether a shared store (redis, ledger) answered the last readiness round: 1 up, 0 down. A down store degrades the instance; it fails readiness only when named in llm_health's fail_on.",
}, []string{"store"})

var healthCollectors = metricset.Declare(storeUp)

// registerMetrics registers the health collectors into reg, which may
// already hold them from an earlier load.
func registerMetrics(reg *prometheus.Registry) error {
	return metricset.Register(reg, healthCollectors)
}

// observeStore records one store's state after a round.
func observeStore(name string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	storeUp.WithLabelValues(name).Set(v)
}
