package ledger

import (
	"context"
	"errors"
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
	// Spool, when set, keeps the records the store cannot take (it is
	// away, or failing) on disk until it takes them again, instead of
	// dropping them; the ledger closes it. It needs a SpoolStore (the DB).
	Spool *Spool
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

	// The spool and the keeper (replay.go). spooling, the writer's own,
	// is set while records go to the spool rather than the store.
	spool      *Spool
	sstore     SpoolStore
	spooling   bool
	wake       chan struct{}
	keepCtx    context.Context
	keepStop   context.CancelFunc
	keeperDone chan struct{}
	// up is whether the store took the last write; downSince when it
	// stopped (0: up); the last* times rate-limit warnings.
	up         atomic.Bool
	downSince  atomic.Int64
	lastDown   atomic.Int64
	lastSpool  atomic.Int64
	lastReject atomic.Int64
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
		flushReq: make(chan chan struct{}), wake: make(chan struct{}, 1), keeperDone: make(chan struct{}),
	}
	l.up.Store(true)
	if ss, ok := store.(SpoolStore); ok && cfg.Spool != nil {
		l.spool, l.sstore = cfg.Spool, ss
		// Records an earlier run left wait for the keeper: new ones
		// queue behind them.
		l.spooling = l.spool.Pending() > 0
	} else if cfg.Spool != nil {
		cfg.Spool.Close()
	}
	if c, ok := store.(connector); ok && !c.Ready() {
		l.up.Store(false)
		l.downSince.Store(time.Now().UnixNano())
	}
	l.keepCtx, l.keepStop = context.WithCancel(context.Background())
	l.SetRetention(cfg.Retention)
	live.Store(l, struct{}{})
	go l.run()
	go l.keep()
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
// ctx ends. With a spool, it waits for the records spooled before it to
// be written too. Tests and Close use it; the request path never does.
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
	case <-ctx.Done():
		return ctx.Err()
	}
	if l.spool == nil {
		return nil
	}
	target, _, _ := l.spool.progress()
	l.wakeKeeper()
	for {
		_, done, changed := l.spool.progress()
		if done >= target {
			return nil
		}
		select {
		case <-changed:
		case <-l.keeperDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close writes what is queued (to the spool when the store does not
// take it), stops the writer and the keeper, and closes the spool and
// the store. What the spool holds stays on disk for the next start.
func (l *Ledger) Close() error {
	if l == nil {
		return nil
	}
	l.stopOnce.Do(func() { close(l.done) })
	<-l.stopped
	l.keepStop()
	<-l.keeperDone
	live.Delete(l)
	if l.spool != nil {
		l.spool.Close()
	}
	return l.store.Close()
}

// wakeKeeper tells the keeper there is work, without waiting.
func (l *Ledger) wakeKeeper() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
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
// only that record is lost. With a spool, a batch the store does not
// take goes to the spool, and so does every batch after it until the
// keeper has written the spool back; without one, a failed batch is
// retried once, then dropped and counted: the writer must keep up with
// the queue rather than hold records for a database that is gone.
func (l *Ledger) write(buf []Record) []Record {
	if len(buf) == 0 {
		return buf
	}
	if l.spool != nil {
		l.writeSpooling(buf)
		return buf[:0]
	}
	var err error
	for try := 0; try < 2; try++ {
		if err = l.insert(buf); err == nil {
			recordsWritten.Add(float64(len(buf)))
			return buf[:0]
		}
		if refusedForData(l.store, err) {
			if rest, err := l.writeEach(buf); len(rest) > 0 {
				l.dropFailed(len(rest), err)
			}
			return buf[:0]
		}
	}
	l.dropFailed(len(buf), err)
	return buf[:0]
}

// dropFailed counts and logs n records lost to a store error.
func (l *Ledger) dropFailed(n int, err error) {
	writeErrors.Inc()
	recordsDropped.Add(float64(n))
	if rateOK(&l.lastDrop, time.Now().UnixNano(), dropLogEvery) {
		l.logger.Error("writing usage ledger records failed; the batch is dropped (see llm_ledger_records_dropped_total)",
			zap.Int("records", n), zap.Error(err))
	}
}

// writeSpooling is write with a spool: the store directly while the
// spool is empty, else the spool.
func (l *Ledger) writeSpooling(buf []Record) {
	if l.spooling && l.spool.Drained() {
		l.spooling = false
		l.wakeKeeper() // it deletes the sealed segment
		if rateOK(&l.lastSpool, time.Now().UnixNano(), dropLogEvery) {
			l.logger.Info("usage ledger spool written back; records go to the database directly again")
		}
	}
	if !l.spooling {
		err := l.insert(buf)
		if err == nil {
			recordsWritten.Add(float64(len(buf)))
			return
		}
		if refusedForData(l.store, err) {
			if buf, err = l.writeEach(buf); len(buf) == 0 {
				return
			}
		}
		l.spooling = true
		l.down(err)
		if rateOK(&l.lastSpool, time.Now().UnixNano(), dropLogEvery) {
			l.logger.Warn("usage ledger database unavailable; records are spooled to disk until it takes them",
				zap.String("spool", l.spool.Dir()), zap.Error(err))
		}
	}
	kept, err := l.spool.Append(buf)
	recordsSpooled.Add(float64(kept))
	if lost := len(buf) - kept; lost > 0 {
		recordsDropped.Add(float64(lost))
		now := time.Now().UnixNano()
		if rateOK(&l.lastDrop, now, dropLogEvery) {
			if err != nil {
				l.logger.Error("writing the usage ledger spool failed; records are dropped", zap.Int("records", lost), zap.Error(err))
			} else {
				l.logger.Warn("usage ledger spool is full; records are dropped (see llm_ledger_records_dropped_total)",
					zap.Int("records", lost), zap.Int64("spool_bytes", l.spool.Bytes()))
			}
		}
	}
	l.wakeKeeper()
}

// insert writes one batch, bounded by writeTimeout.
func (l *Ledger) insert(recs []Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	start := time.Now()
	err := l.store.Insert(ctx, recs)
	observeWrite(insertDuration, insertErrors, start, err)
	return err
}

// writeEach writes recs one record a transaction, after the database
// refused them as a batch for what one of them holds: the records it
// refuses alone are dropped, counted in llm_ledger_records_rejected_total
// and logged by trace id and error code, never by content. At the first
// store error it stops and returns the records from there on, with the
// error.
func (l *Ledger) writeEach(recs []Record) ([]Record, error) {
	for i := range recs {
		err := l.insert(recs[i : i+1])
		switch {
		case err == nil:
			recordsWritten.Inc()
		case refusedForData(l.store, err):
			l.reject(&recs[i], err)
		default:
			return recs[i:], err
		}
	}
	return nil, nil
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
	if errors.Is(err, ErrNotReady) {
		return
	}
	if err != nil {
		l.logger.Warn("sweeping the usage ledger", zap.Error(err))
		return
	}
	if n > 0 {
		l.logger.Info("deleted usage ledger records past their retention", zap.Int64("records", n))
	}
}
