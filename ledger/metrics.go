package ledger

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/metricset"
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
	recordsSpooled = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "records_spooled_total",
		Help: "Usage ledger records written to the on-disk spool because the store did not take them.",
	})
	recordsReplayed = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "records_replayed_total",
		Help: "Usage ledger records written from the spool to the store (also counted as written).",
	})
	// The gauges read the process's open ledgers when scraped, so the
	// request path pays nothing for them.
	queueDepth = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "queue_records",
		Help: "Usage ledger records waiting in memory for the writer.",
	}, func() float64 { return sumLive(func(l *Ledger) float64 { return float64(len(l.q)) }) })
	spoolBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "spool_bytes",
		Help: "Bytes of the usage ledger's on-disk spool.",
	}, func() float64 { return sumLive(func(l *Ledger) float64 { return float64(l.spoolBytes()) }) })
	spoolRecords = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "spool_records",
		Help: "Usage ledger records waiting in the on-disk spool for the store.",
	}, func() float64 { return sumLive(func(l *Ledger) float64 { return float64(l.spoolPending()) }) })
	writerLag = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "writer_lag_seconds",
		Help: "Age of the oldest usage ledger record waiting in the spool for the store; 0 when the writer keeps up.",
	}, func() float64 { return maxLive(func(l *Ledger) float64 { return l.lag().Seconds() }) })
	storeUp = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "store_up",
		Help: "1 when the usage ledger's store takes writes, 0 while it is away (records go to the spool).",
	}, func() float64 {
		return 1 - maxLive(func(l *Ledger) float64 {
			if l.up.Load() {
				return 0
			}
			return 1
		})
	})
	writeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "write_errors_total",
		Help: "Batches of usage ledger records the store refused (after one retry).",
	})
)

// RegisterMetrics registers the ledger's metrics with reg (nil: none);
// registering them again is not an error.
func RegisterMetrics(reg *prometheus.Registry) error {
	return metricset.Register(reg, ledgerCollectors)
}

var ledgerCollectors = metricset.Declare(recordsWritten, recordsDropped, recordsRejected, recordsSpooled, recordsReplayed,
	queueDepth, spoolBytes, spoolRecords, writerLag, storeUp, writeErrors, storeDuration, storeErrors)

// live holds the process's open ledgers, for the gauges.
var live sync.Map // *Ledger → struct{}

func sumLive(f func(*Ledger) float64) float64 {
	var v float64
	live.Range(func(k, _ any) bool { v += f(k.(*Ledger)); return true })
	return v
}

func maxLive(f func(*Ledger) float64) float64 {
	var v float64
	live.Range(func(k, _ any) bool { v = max(v, f(k.(*Ledger))); return true })
	return v
}

func (l *Ledger) spoolBytes() int64 {
	if l.spool == nil {
		return 0
	}
	return l.spool.Bytes()
}

func (l *Ledger) spoolPending() uint64 {
	if l.spool == nil {
		return 0
	}
	return l.spool.Pending()
}

func (l *Ledger) lag() time.Duration {
	if l.spool == nil {
		return 0
	}
	return l.spool.lag(time.Now())
}
