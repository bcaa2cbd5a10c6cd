package ledger

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// The keeper is the ledger's second goroutine. It reaches the database
// when the gateway started without it (connector), and writes the
// spool's records back in order once the database takes them, retrying
// with backoff while it does not. The writer never waits for it: while
// the spool holds records the writer appends to it, and it writes to
// the database directly again once the keeper has emptied it.

const (
	// keepMinBackoff and keepMaxBackoff bound the wait between attempts
	// while the database is away, doubling from the first to the second.
	keepMinBackoff = 250 * time.Millisecond
	keepMaxBackoff = 5 * time.Second
	// keepIdle is how often an idle keeper looks at the spool without
	// being woken.
	keepIdle = time.Second
	// connectTimeout bounds one attempt to reach the database and
	// migrate it.
	connectTimeout = 15 * time.Second
	// downLogEvery bounds the keeper's "still unreachable" warnings.
	downLogEvery = time.Minute
)

// connector is a store that may need reaching before it takes writes
// (DB.Connect).
type connector interface {
	Connect(ctx context.Context) error
	Ready() bool
}

// keep is the keeper's loop; it ends when the ledger closes.
func (l *Ledger) keep() {
	defer close(l.keeperDone)
	backoff := keepMinBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-l.keepCtx.Done():
			return
		case <-l.wake:
		case <-timer.C:
		}
		if l.keepOnce() {
			if !l.up.Swap(true) && l.downSince.Load() != 0 {
				l.logger.Info("usage ledger database reached again",
					zap.Duration("away", time.Since(time.Unix(0, l.downSince.Swap(0)))))
			}
			backoff = keepMinBackoff
			timer.Reset(keepIdle)
			continue
		}
		timer.Reset(backoff)
		backoff = min(2*backoff, keepMaxBackoff)
	}
}

// keepOnce reaches the database if it must and writes what the spool
// holds; false when the database failed (then it is tried again after
// the backoff).
func (l *Ledger) keepOnce() bool {
	if c, ok := l.store.(connector); ok && !c.Ready() {
		ctx, cancel := context.WithTimeout(l.keepCtx, connectTimeout)
		err := c.Connect(ctx)
		cancel()
		if err != nil {
			l.down(err)
			return false
		}
		l.logger.Info("usage ledger database reached; its schema is in place")
	}
	if l.spool == nil || l.sstore == nil {
		return true
	}
	for l.keepCtx.Err() == nil {
		n, err := l.replayBatch()
		if err != nil {
			if l.keepCtx.Err() == nil {
				l.down(err)
			}
			return false
		}
		if n == 0 {
			return true
		}
	}
	return true
}

// down notes that the database failed: the store-up metric drops to 0,
// and a warning is logged at most every downLogEvery.
func (l *Ledger) down(err error) {
	now := time.Now().UnixNano()
	l.downSince.CompareAndSwap(0, now)
	l.up.Store(false)
	if rateOK(&l.lastDown, now, downLogEvery) {
		f := []zap.Field{zap.Error(err)}
		if l.spool != nil {
			f = append(f, zap.Uint64("spooled_records", l.spool.Pending()), zap.Int64("spool_bytes", l.spool.Bytes()))
		}
		l.logger.Warn("usage ledger database unavailable; records wait in the spool and are written when it returns", f...)
	}
}

// rateOK reports whether an event rate-limited to one per every may be
// logged now, claiming the slot.
func rateOK(last *atomic.Int64, now int64, every time.Duration) bool {
	prev := last.Load()
	return now-prev >= int64(every) && last.CompareAndSwap(prev, now)
}

// replayBatch writes the next batch of the spool's oldest segment and
// returns how many records it read (0: the spool has nothing more now).
func (l *Ledger) replayBatch() (int, error) {
	seg, gone := l.spool.head()
	for _, id := range gone {
		// The segment's file is gone; its position row is no longer
		// needed (one left by a failure here is a few bytes, harmless).
		ctx, cancel := context.WithTimeout(l.keepCtx, 5*time.Second)
		_ = l.sstore.ForgetSpool(ctx, id)
		cancel()
	}
	if seg == nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(l.keepCtx, writeTimeout)
	defer cancel()
	if !seg.posKnown {
		pos, err := l.sstore.SpoolPosition(ctx, seg.id)
		if err != nil {
			return 0, err
		}
		l.spool.commit(seg, pos)
		seg.posKnown = true
	}
	recs, last, err := l.spool.read(seg, l.batch)
	if err != nil {
		lost := l.spool.discard(seg)
		recordsDropped.Add(float64(lost))
		l.logger.Error("a usage ledger spool segment is damaged; its remaining records are dropped",
			zap.Uint64("records", lost), zap.Error(err))
		return int(lost), nil
	}
	if len(recs) == 0 {
		return 0, nil
	}
	read := len(recs)
	first := last - uint64(read) + 1
	if c := seg.committed; c >= first {
		recs = recs[min(c-first+1, uint64(read)):]
	}
	if len(recs) == 0 {
		seg.mark()
		return read, nil
	}
	err = l.insertSpooled(ctx, seg.id, last, recs)
	if err == nil {
		l.spool.commit(seg, last)
		seg.mark()
		recordsWritten.Add(float64(len(recs)))
		recordsReplayed.Add(float64(len(recs)))
		return read, nil
	}
	if !refusedForData(l.store, err) {
		seg.rewind()
		return 0, err
	}
	// One record refused the batch: write them one by one, moving the
	// position past the one the database refuses alone.
	base := last - uint64(len(recs))
	for i := range recs {
		seq := base + uint64(i) + 1
		err := l.insertSpooled(ctx, seg.id, seq, recs[i:i+1])
		if err != nil && refusedForData(l.store, err) {
			l.reject(&recs[i], err)
			err = l.insertSpooled(ctx, seg.id, seq, nil)
		} else if err == nil {
			recordsWritten.Inc()
			recordsReplayed.Inc()
		}
		if err != nil {
			seg.rewind()
			return 0, err
		}
		l.spool.commit(seg, seq)
	}
	seg.mark()
	return read, nil
}

// reject counts and logs a record the database refuses alone.
func (l *Ledger) reject(r *Record, err error) {
	recordsRejected.Inc()
	recordsDropped.Inc()
	if !rateOK(&l.lastReject, time.Now().UnixNano(), dropLogEvery) {
		return
	}
	l.logger.Warn("the usage ledger's database refused a record; it is dropped, the rest of its batch is written",
		zap.String("trace_id", r.TraceID), zap.String("code", errorCode(err)))
}
