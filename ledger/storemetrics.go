package ledger

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The database calls of the ledger's writer, timed and counted by op:
// "insert" (a batch from the queue) and "replay" (a batch from the
// spool). A failed call is counted whatever became of its records
// (spooled, retried, written one by one or dropped, which the records_*
// counters tell), so the errors show an outage the spool hides.
var (
	storeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "store_write_duration_seconds",
		Help:    "Time of each write of a batch of usage ledger records to the database, by op (insert, replay), failures included.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"op"})
	storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llm", Subsystem: "ledger", Name: "store_errors_total",
		Help: "Writes of usage ledger records the database failed, by op (insert, replay): unreachable, timed out or refused.",
	}, []string{"op"})
)

// The ops' children, made once.
var (
	insertDuration, replayDuration = storeDuration.WithLabelValues("insert"), storeDuration.WithLabelValues("replay")
	insertErrors, replayErrors     = storeErrors.WithLabelValues("insert"), storeErrors.WithLabelValues("replay")
)

// observeWrite records one database write that started at start.
func observeWrite(d prometheus.Observer, errs prometheus.Counter, start time.Time, err error) {
	d.Observe(time.Since(start).Seconds())
	if err != nil {
		errs.Inc()
	}
}

// insertSpooled is the store's InsertSpooled, timed and counted.
func (l *Ledger) insertSpooled(ctx context.Context, segment string, through uint64, recs []Record) error {
	start := time.Now()
	err := l.sstore.InsertSpooled(ctx, segment, through, recs)
	observeWrite(replayDuration, replayErrors, start, err)
	return err
}
