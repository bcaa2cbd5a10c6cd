package ledger

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// Defaults of Config.
const (
	DefaultQueue     = 16384
	DefaultBatch     = 2000
	DefaultFlush     = 200 * time.Millisecond
	DefaultRetention = 90 * 24 * time.Hour
	// sweepEvery is how often records past the retention are deleted.
	sweepEvery = time.Hour
	// dropLogEvery bounds the warnings a full queue logs.
	dropLogEvery = 10 * time.Second
	// writeTimeout bounds one batch's write, so a stuck database cannot
	// hold the writer (and with it Close) forever.
	writeTimeout = 30 * time.Second
)

// Config sets a Ledger's queue and writer.
type Config struct {
	// Queue is how many records may wait for the writer; a record beyond
	// it is dropped, counted and logged (default DefaultQueue).
	Queue int
	// Batch is the most records written in one transaction (default
	// DefaultBatch); Flush is the longest a record waits for a batch to
	// fill (default DefaultFlush).
	Batch int
	Flush time.Duration
	// Retention is how long records are kept (default DefaultRetention;
	// negative keeps them forever).
	Retention time.Duration
	Logger    *zap.Logger
}

// Ledger queues records and writes them to its Store from one goroutine.
// A nil *Ledger records nothing, so callers need no check.
type Ledger struct {
	store     Store
	q         chan Record
	batch     int
	flush     time.Duration
	retention atomic.Int64
	logger    *zap.Logger

	done     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
	lastDrop atomic.Int64
	// flushReq asks the writer to write what is queued now (Sync).
	flushReq chan chan struct{}
}

// New starts a ledger writing to store. Close stops it.
func New(store Store, cfg Config) *Ledger {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Flush <= 0 {
		cfg.Flush = DefaultFlush
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	l := &Ledger{
		store: store, q: make(chan Record, cfg.Queue), batch: cfg.Batch, flush: cfg.Flush,
		logger: cfg.Logger, done: make(chan struct{}), stopped: make(chan struct{}),
		flushReq: make(chan chan struct{}),
	}
	l.SetRetention(cfg.Retention)
	go l.run()
	return l
}

// SetRetention changes how long records are kept (0: the default,
// negative: forever); a reload that changes the option applies it to the
// running ledger.
func (l *Ledger) SetRetention(d time.Duration) {
	if d == 0 {
		d = DefaultRetention
	}
	l.retention.Store(int64(d))
}

// Store returns the store the ledger writes to, for queries.
func (l *Ledger) Store() Store {
	if l == nil {
		return nil
	}
	return l.store
}

// Record queues the finished request e. It never blocks: when the queue
// is full the record is dropped, counted in
// llm_ledger_records_dropped_total and logged (at most every ten
// seconds).
func (l *Ledger) Record(e *observe.Entry) {
	if l == nil || e == nil || !recordable(e) {
		return
	}
	var r Record
	r.FromEntry(e, time.Now())
	l.Add(&r)
}

// recordable reports whether e belongs in the ledger: a request of an
// authenticated caller (an unauthenticated one has no workspace to be
// seen in, and must not be able to fill the store) that is not a call of
// the gateway's own management APIs (operation "control"), nor a run of a
// batch line that another run of the line already charged.
func recordable(e *observe.Entry) bool {
	return e.Workspace != "" && e.Operation != "control" && !e.ChargeDuplicate
}

// Add queues r as Record does.
func (l *Ledger) Add(r *Record) {
	if l == nil {
		return
	}
	select {
	case <-l.done:
		recordsDropped.Inc()
		return
	default:
	}
	select {
	case l.q <- *r:
	default:
		recordsDropped.Inc()
		now := time.Now().UnixNano()
		last := l.lastDrop.Load()
		if now-last >= int64(dropLogEvery) && l.lastDrop.CompareAndSwap(last, now) {
			l.logger.Warn("usage ledger queue is full: records are being dropped (see llm_ledger_records_dropped_total); the store is slower than the traffic",
				zap.Int("queue", cap(l.q)))
		}
	}
}

// Sync writes every record queued before it was called, or returns when
// ctx ends. Tests and Close use it; the request path never does.
func (l *Ledger) Sync(ctx context.Context) error {
	if l == nil {
		return nil
	}
	ack := make(chan struct{})
	select {
	case l.flushReq <- ack:
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued, stops the writer and closes the store.
func (l *Ledger) Close() error {
	if l == nil {
		return nil
	}
	l.stopOnce.Do(func() { close(l.done) })
	<-l.stopped
	return l.store.Close()
}

// run is the writer: it gathers records into batches and writes each
// batch in one transaction, and sweeps expired records now and then.
func (l *Ledger) run() {
	defer close(l.stopped)
	buf := make([]Record, 0, l.batch)
	tick := time.NewTicker(l.flush)
	defer tick.Stop()
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	l.sweep()
	for {
		select {
		case r := <-l.q:
			buf = append(buf, r)
			buf = l.fill(buf)
			if len(buf) >= l.batch {
				buf = l.write(buf)
			}
		case <-tick.C:
			buf = l.write(buf)
		case ack := <-l.flushReq:
			buf = l.write(l.fill(buf))
			for len(l.q) > 0 {
				buf = l.write(l.fill(buf))
			}
			close(ack)
		case <-sweep.C:
			l.sweep()
		case <-l.done:
			buf = l.write(l.fill(buf))
			for len(l.q) > 0 {
				buf = l.write(l.fill(buf))
			}
			return
		}
	}
}

// fill moves queued records into buf without waiting, up to a batch.
func (l *Ledger) fill(buf []Record) []Record {
	for len(buf) < l.batch {
		select {
		case r := <-l.q:
			buf = append(buf, r)
		default:
			return buf
		}
	}
	return buf
}

// write stores buf and returns it emptied. A batch the database refuses
// for what a record holds is written record by record (writeEach), so
// only that record is lost. A batch failed otherwise is retried once,
// then dropped and counted: the writer must keep up with the queue
// rather than hold records for a database that is gone.
func (l *Ledger) write(buf []Record) []Record {
	if len(buf) == 0 {
		return buf
	}
	var err error
	for try := 0; try < 2; try++ {
		if err = l.insert(buf); err == nil {
			recordsWritten.Add(float64(len(buf)))
			return buf[:0]
		}
		if refusedForData(l.store, err) {
			l.writeEach(buf)
			return buf[:0]
		}
	}
	writeErrors.Inc()
	recordsDropped.Add(float64(len(buf)))
	l.logger.Error("writing usage ledger records failed; the batch is dropped",
		zap.Int("records", len(buf)), zap.Error(err))
	return buf[:0]
}

// insert writes one batch, bounded by writeTimeout.
func (l *Ledger) insert(recs []Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return l.store.Insert(ctx, recs)
}

// writeEach writes recs one record a transaction, after the database
// refused them as a batch for what one of them holds: the records it
// refuses alone are dropped, counted in llm_ledger_records_rejected_total
// and logged by trace id and error code, never by content.
func (l *Ledger) writeEach(recs []Record) {
	for i := range recs {
		err := l.insert(recs[i : i+1])
		switch {
		case err == nil:
			recordsWritten.Inc()
		case refusedForData(l.store, err):
			recordsRejected.Inc()
			recordsDropped.Inc()
			l.logger.Warn("the usage ledger's database refused a record; it is dropped, the rest of its batch is written",
				zap.String("trace_id", recs[i].TraceID), zap.String("code", errorCode(err)))
		default:
			writeErrors.Inc()
			recordsDropped.Inc()
			l.logger.Error("writing a usage ledger record failed; it is dropped", zap.Error(err))
		}
	}
}

// sweep deletes records older than the retention.
func (l *Ledger) sweep() {
	d := time.Duration(l.retention.Load())
	if d < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := l.store.Sweep(ctx, time.Now().Add(-d))
	if err != nil {
		l.logger.Warn("sweeping the usage ledger", zap.Error(err))
		return
	}
	if n > 0 {
		l.logger.Info("deleted usage ledger records past their retention", zap.Int64("records", n))
	}
}
