package batches

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// Leaser is what a shared store offers for running batches across a
// cluster (kvstore.Redis implements it). A lease is held by one owner at
// a time and lapses after its TTL unless renewed.
type Leaser interface {
	// Claim takes or renews key for owner for ttl; false when another
	// owner holds it.
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	// Release drops key if owner holds it.
	Release(ctx context.Context, key, owner string) error
}

// DefaultLease is the lease a gateway with Redis runs its batches under:
// a batch whose owner died is taken over within one and a half leases
// (15 s).
const DefaultLease = 10 * time.Second

// MinLease and MaxLease bound a configured lease (the llm app's
// `batches { lease <d> }`). Below MinLease a store that answers slowly for
// a moment (the watcher renews every watchEvery, each try bounded by it)
// would cost the owner its batches; above MaxLease a batch whose owner
// died waits that long and a half for another instance.
const (
	MinLease = 2 * time.Second
	MaxLease = 5 * time.Minute
)

// SetLease changes the lease the engine's batches run under, from the
// next renewal on; d <= 0 restores the one it was created with. It does
// nothing on an engine without leases (no Redis). The engine outlives
// reloads, so the newest loaded config's lease applies. Every instance of
// a cluster should use one lease: an instance takes a batch over when the
// owner's lease, of the owner's length, lapsed.
func (e *Engine) SetLease(d time.Duration) {
	if e.cfg.Lease <= 0 {
		return
	}
	if d <= 0 {
		d = e.cfg.Lease
	}
	e.lease.Store(int64(d))
}

// leaseLen is the lease batches run under now.
func (e *Engine) leaseLen() time.Duration {
	if d := time.Duration(e.lease.Load()); d > 0 {
		return d
	}
	return e.cfg.Lease
}

// watchEvery is how often the owner of a batch renews its lease, looks
// for a cancel recorded by another instance and stores changed counts,
// which bounds how late a cancel from another instance stops new lines
// and how old request_counts read on another instance are.
const watchEvery = 250 * time.Millisecond

// leaser returns the store's Leaser when batches run under leases
// (Config.Lease set and the store has leases), else nil.
func (e *Engine) leaser() Leaser {
	if e.cfg.Lease <= 0 {
		return nil
	}
	l, _ := e.cfg.KV.(Leaser)
	return l
}

func (e *Engine) leaseKey(ws, id string) string {
	return files.WorkspaceDir(e.cfg.Prefix, ws) + "/" + id + ".lease"
}

// cancelKey marks a cancel made on an instance that does not run the
// batch. It is a key of its own, never rewritten by the owner's record
// writes, so the cancel cannot be lost between two of them.
func (e *Engine) cancelKey(ws, id string) string {
	return files.WorkspaceDir(e.cfg.Prefix, ws) + "/" + id + ".cancel"
}

// claim takes the lease of batch id for this instance.
func (e *Engine) claim(l Leaser, ws, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := l.Claim(ctx, e.leaseKey(ws, id), e.cfg.Instance, e.leaseLen())
	return err == nil && ok
}

// watch runs beside a leased job until done closes: it renews the lease
// (a job whose lease another instance took stops at once, without writing
// anything more: the other instance runs it now), adopts a cancel marked
// by another instance, and stores the record when its counts changed.
func (e *Engine) watch(j *job, l Leaser, done <-chan struct{}) {
	ws, id := j.rec.Caller.WorkspaceID, j.rec.Batch.ID
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	var last RequestCounts
	renewed := time.Now()
	for {
		select {
		case <-done:
			return
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), watchEvery)
		lease := e.leaseLen()
		ok, err := l.Claim(ctx, e.leaseKey(ws, id), e.cfg.Instance, lease)
		_, cerr := e.cfg.KV.Load(ctx, e.cancelKey(ws, id))
		cancel()
		switch {
		case err == nil && ok:
			renewed = time.Now()
		case err == nil || time.Since(renewed) > lease:
			// Taken by another instance, or not renewed for a whole
			// lease (the store unreachable): another instance may run
			// the batch now, so this one must not.
			e.cfg.Logger.Warn("batch: lease lost, another instance runs the batch", zap.String("batch_id", id))
			e.mu.Lock()
			j.lost = true
			j.halt()
			e.mu.Unlock()
			return
		}
		if cerr == nil {
			e.cancelJob(j, e.cfg.Now().Unix())
		}
		e.mu.Lock()
		counts, status := j.rec.Batch.RequestCounts, j.rec.Batch.Status
		e.mu.Unlock()
		if counts != last || status == StatusCancelling {
			if e.persistIfLive(j) {
				last = counts
			}
		}
	}
}

// owns reports whether this instance may still write j's results and
// record, and marks j lost when it may not. The watcher notices a lost
// lease only at its next tick, and an instance that was frozen longer
// than the lease (a long pause, a partition) wakes with writes under way:
// without this check it would overwrite the record of the instance that
// took the batch over, or of the batch that instance finished (and
// released). The stored record says who runs the batch: ended, or adopted
// by another instance that holds the lease, it is not this one's any
// more. A store error answers true: the write that follows fails or is
// retried as any write is.
func (e *Engine) owns(j *job) bool {
	l := e.leaser()
	if l == nil {
		return true
	}
	e.mu.Lock()
	ws, id, lost := j.rec.Caller.WorkspaceID, j.rec.Batch.ID, j.lost
	e.mu.Unlock()
	if lost {
		return false
	}
	ctx, cancel := ioCtx()
	defer cancel()
	stored, err := e.loadKey(ctx, e.key(ws, id))
	if err != nil {
		return true
	}
	if !Terminal(stored.Batch.Status) {
		if stored.Instance == e.cfg.Instance {
			return true
		}
		// Not yet recorded as this instance's (an adopted batch before
		// its first write): the lease decides.
		if ok, err := l.Claim(ctx, e.leaseKey(ws, id), e.cfg.Instance, e.leaseLen()); err != nil || ok {
			return true
		}
	}
	e.cfg.Logger.Warn("batch: another instance ran the batch meanwhile; this one writes nothing more", zap.String("batch_id", id))
	e.mu.Lock()
	j.lost = true
	j.halt()
	e.mu.Unlock()
	return false
}

// cancelJob moves a job running here to cancelling (once).
func (e *Engine) cancelJob(j *job, at int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := &j.rec.Batch
	if j.cancelled || j.abort != nil || Terminal(b.Status) || b.Status == StatusFinalizing {
		return
	}
	b.Status, b.CancellingAt = StatusCancelling, ptr(at)
	j.cancelled = true
	j.halt()
}

// activeDir holds one mark per unfinished batch (with leases), so
// looking for batches to adopt reads those, not every batch ever run.
func (e *Engine) activeKey(ws, id string) string {
	return e.cfg.Prefix + "/active/" + ws + "/" + id
}

// markActive records that batch id of ws is unfinished.
func (e *Engine) markActive(ctx context.Context, ws, id string) error {
	return e.cfg.KV.Store(ctx, e.activeKey(ws, id), []byte(e.key(ws, id)))
}

// adoptLoop runs on engines with leases: every half lease it looks for
// unfinished batches whose lease lapsed (their owner crashed, was killed
// or replaced by a pod with a new identity, or stopped and released it)
// and runs them here, resuming from their recorded lines. The first pass
// reads every batch record (this instance's restart resume, and batches
// from before the active marks); later ones read the marks only.
func (e *Engine) adoptLoop(l Leaser) {
	for first := true; ; first = false {
		e.adopt(l, first)
		t := time.NewTimer(e.leaseLen() / 2)
		select {
		case <-e.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// adopt claims and launches every unfinished batch without a live lease:
// all records when all is set, else those with an active mark.
func (e *Engine) adopt(l Leaser, all bool) {
	ctx, cancel := ioCtx()
	dir := e.cfg.Prefix + "/active"
	if all {
		dir = e.cfg.Prefix
	}
	keys, err := files.ListKeys(ctx, e.cfg.KV, dir, true)
	cancel()
	if err != nil {
		e.cfg.Logger.Error("batch: listing batches to adopt", zap.Error(err))
		return
	}
	for _, k := range keys {
		if e.ctx.Err() != nil {
			return
		}
		if !all {
			ws, id, ok := strings.Cut(strings.TrimPrefix(k, dir+"/"), "/")
			if !ok {
				continue
			}
			k = e.key(ws, id)
		}
		if !strings.HasSuffix(k, ".json") || strings.Contains(k, ".parts/") || strings.Contains(k, "/active/") {
			continue
		}
		ctx, cancel := ioCtx()
		rec, err := e.loadKey(ctx, k)
		cancel()
		if err != nil || Terminal(rec.Batch.Status) {
			continue
		}
		e.mu.Lock()
		_, running := e.running[rec.Batch.ID]
		e.mu.Unlock()
		if running || !e.claim(l, rec.Caller.WorkspaceID, rec.Batch.ID) {
			continue
		}
		adopted := rec.Instance != e.cfg.Instance
		if adopted {
			e.cfg.Logger.Info("batch: taking over from another instance", zap.String("batch_id", rec.Batch.ID))
		}
		rec.Instance = e.cfg.Instance
		ctx, cancel = ioCtx()
		_, cerr := e.cfg.KV.Load(ctx, e.cancelKey(rec.Caller.WorkspaceID, rec.Batch.ID))
		cancel()
		e.start(rec, cerr == nil, adopted)
	}
}

// start launches a stored batch found unfinished (a restart, or adopted
// from another instance): a cancelled one finishes cancelling, one that
// needs credentials the gateway does not store fails gateway_restarted,
// the others resume from their recorded lines.
func (e *Engine) start(rec *record, cancelMarked, adopted bool) {
	j := &job{rec: rec, stop: make(chan struct{}), adopted: adopted}
	if rec.Batch.Status == StatusCancelling || (cancelMarked && rec.Batch.Status != StatusFinalizing) {
		if rec.Batch.Status != StatusCancelling {
			rec.Batch.Status, rec.Batch.CancellingAt = StatusCancelling, ptr(e.cfg.Now().Unix())
		}
		j.cancelled = true
		j.halt()
	}
	if !rec.Resumable {
		e.launchWith(j, func() {
			e.finish(j, reasonNone, []LineError{{Code: "gateway_restarted", Message: "the gateway restarted while the batch ran; it was created with credentials the gateway does not store, so it could not resume"}}, nil)
		})
		return
	}
	e.cfg.Logger.Info("batch: resuming", zap.String("batch_id", rec.Batch.ID), zap.String("status", rec.Batch.Status))
	e.launch(j)
}

// dropMarks deletes a batch's cancel and active marks once it is
// terminal.
func (e *Engine) dropMarks(j *job) {
	ctx, cancel := ioCtx()
	defer cancel()
	ws, id := j.rec.Caller.WorkspaceID, j.rec.Batch.ID
	for _, k := range []string{e.cancelKey(ws, id), e.activeKey(ws, id)} {
		if err := e.cfg.KV.Delete(ctx, k); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.cfg.Logger.Warn("batch: dropping a mark", zap.String("batch_id", id), zap.Error(err))
		}
	}
}
