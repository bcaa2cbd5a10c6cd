package realtime

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
)

// Directions of relayed traffic, as the metrics label them.
const (
	dirIn  = 0 // client → provider
	dirOut = 1 // provider → client
)

var (
	openSessions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "llm_gateway_realtime_sockets_open",
		Help: "Realtime WebSocket sessions open now.",
	})
	sessionsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_realtime_sockets_closed_total",
		Help: "Realtime WebSocket sessions ended, by cause (client_closed, upstream_closed, refused, idle_timeout, session_expired, slow_client, message_too_big, shutdown, …).",
	}, []string{"cause"})
	relayedBytesVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_realtime_relayed_bytes_total",
		Help: "Bytes of WebSocket message payload relayed, by direction (in: client to provider, out: provider to client).",
	}, []string{"direction"})
	relayedMessagesVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llm_gateway_realtime_relayed_messages_total",
		Help: "WebSocket messages relayed, by direction (in: client to provider, out: provider to client).",
	}, []string{"direction"})

	// The two directions' children, resolved once: the relay adds to
	// them per message.
	relayedBytes    = [2]prometheus.Counter{relayedBytesVec.WithLabelValues("in"), relayedBytesVec.WithLabelValues("out")}
	relayedMessages = [2]prometheus.Counter{relayedMessagesVec.WithLabelValues("in"), relayedMessagesVec.WithLabelValues("out")}
)

var collectors = metricset.Declare(openSessions, sessionsEnded, relayedBytesVec, relayedMessagesVec)

// RegisterMetrics registers the realtime collectors into reg, which may
// already hold them from an earlier load.
func RegisterMetrics(reg *prometheus.Registry) error {
	return metricset.Register(reg, collectors)
}
