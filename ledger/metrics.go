package ledger

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The ledger's metrics are process-wide, as the request metrics are
// (package observe): every ledger of the process adds to them.
var (
	recordsWritten = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "records_written_total",
		Help: "Usage ledger records written to the store.",
	})
	recordsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "records_dropped_total",
		Help: "Usage ledger records dropped: the queue was full, the ledger was closing, or the store refused a batch twice.",
	})
	recordsRejected = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "records_rejected_total",
		Help: "Usage ledger records the store refused for what they hold, written alone after their batch was refused; each is also counted as dropped.",
	})
	writeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "write_errors_total",
		Help: "Batches of usage ledger records the store refused (after one retry).",
	})
)

// RegisterMetrics registers the ledger's metrics with reg (nil: none);
// registering them again is not an error.
func RegisterMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{recordsWritten, recordsDropped, recordsRejected, writeErrors} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}
