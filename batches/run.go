package batches

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// ioTimeout bounds each storage operation of a driver; storage writes use
// their own context so a stopping engine still records its progress.
const ioTimeout = 30 * time.Second

func ioCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), ioTimeout)
}

// stop reasons of a dispatch loop
const (
	reasonNone    = iota
	reasonHalted  // cancelled, or ended early (job.abort)
	reasonExpired // the completion window ended
	reasonStopped // the engine stopped: resumed at the next Start
)

// results collects finished lines between checkpoints.
type results struct {
	mu       sync.Mutex
	out, err [][]byte
}

func (r *results) add(line []byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ok {
		r.out = append(r.out, line)
	} else {
		r.err = append(r.err, line)
	}
}

func (r *results) take() (out, errs [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, errs, r.out, r.err = r.out, r.err, nil, nil
	return out, errs
}

func (r *results) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.out) + len(r.err)
}

// progress is what a driver knows of its batch's recorded results.
type progress struct {
	mu         sync.Mutex
	done       map[string]bool // custom_ids with a recorded result
	dispatched map[string]bool // custom_ids started by this run
	seq        int             // the last part number
	outBytes   int64           // bytes of the output parts
}

func (p *progress) isDone(cid string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done[cid] || p.dispatched[cid]
}

func (p *progress) setDispatched(cid string, v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v {
		p.dispatched[cid] = true
	} else {
		delete(p.dispatched, cid)
	}
}

var errInputUnavailable = LineError{Code: "input_file_unavailable", Message: "the input file could not be read"}

func outputTooLarge(limit int64) LineError {
	return LineError{Code: "output_too_large", Message: fmt.Sprintf(
		"the batch's output exceeds the file store's limit of %d bytes; the requests whose results did not fit, and those not yet run, are in the error file with this code", limit)}
}

// drive runs one batch from its current status to a terminal one (or
// until the engine stops). It is the only writer of the batch's record
// and parts, so stored state is never overwritten out of order; the
// engine mutex is held only to read or change the in-memory record.
func (e *Engine) drive(j *job) {
	e.mu.Lock()
	b := j.rec.Batch
	caller, header := j.rec.Caller, mergeHeader(j.rec.Header, j.memHeader)
	e.mu.Unlock()
	ws, id := caller.WorkspaceID, b.ID

	// A queued batch waits here holding its record only. One cancelled
	// while queued goes on without a slot: it runs no line.
	if e.takeRun(j) {
		defer e.freeRun()
	} else if e.ctx.Err() != nil {
		return
	}
	in, err := e.openInput(caller, header, id, b.InputFileID)
	if err != nil {
		if e.ctx.Err() == nil {
			why := errInputUnavailable
			if errors.Is(err, errRoute) {
				why = abortRoute
			}
			e.finish(j, reasonNone, []LineError{why}, nil)
		}
		return
	}
	v := newValidator(b.Endpoint, e.cfg.MaxLines)
	if err := scanLines(in.reader(), e.cfg.MaxLineBytes, func(n int, raw []byte) bool { return v.check(n, raw, e.cfg.MaxLineBytes) }); err != nil {
		if e.ctx.Err() == nil {
			e.finish(j, reasonNone, []LineError{errInputUnavailable}, nil)
		}
		return
	}
	total, lineErrs := v.lines, v.result()
	v = nil // its custom_id set is no longer needed
	if b.Status == StatusValidating {
		if len(lineErrs) > 0 {
			e.finish(j, reasonNone, lineErrs, nil)
			return
		}
		e.mu.Lock()
		if j.rec.Batch.Status == StatusValidating {
			j.rec.Batch.Status = StatusInProgress
		}
		j.rec.Batch.InProgressAt = ptr(e.cfg.Now().Unix())
		e.mu.Unlock()
	}
	st, completed, failed, ok := e.loadParts(ws, id)
	if !ok {
		return
	}
	e.mu.Lock()
	adopted := j.adopted
	e.mu.Unlock()
	if adopted && st.seq < 90_000_000 {
		// A new owner numbers its parts from the next million, so parts a
		// previous owner writes after losing its lease never overwrite
		// this one's (assemble keeps each custom_id's first result).
		st.seq = (st.seq/1_000_000 + 1) * 1_000_000
	}
	e.mu.Lock()
	j.rec.Batch.RequestCounts = RequestCounts{Total: total, Completed: completed, Failed: failed}
	e.mu.Unlock()
	if !e.persist(j) {
		return
	}
	if e.native(j) != nil {
		e.driveNative(j, in, st, caller, header)
		return
	}

	res := &results{}
	reason := e.dispatch(j, in, st, caller, header, res)
	if reason == reasonStopped {
		return // unfinished in storage; resumed at the next Start
	}
	e.mu.Lock()
	if j.lost {
		e.mu.Unlock()
		return // another instance runs the batch now
	}
	e.mu.Unlock()
	e.finishRest(j, in, st, res, reason, nil)
}

// The errors of lines a batch did not run.
var (
	errCancelledLine = LineError{Code: "batch_cancelled", Message: "the batch was cancelled before this request ran"}
	errExpiredLine   = LineError{Code: "batch_expired", Message: "this request could not be executed before the completion window ended"}
)

// finishRest lists each line without a result in the error file and
// finishes the batch: with the abort's error when it ended early, else
// batch_cancelled when cancelled, batch_expired when its window (or the
// provider's) ended first, else missing — for a run whose lines may lack
// a result at its end (a provider job's); nil when every line has one
// unless the run was cut short, as in a managed run, whose input is then
// not read again.
func (e *Engine) finishRest(j *job, in *input, st *progress, res *results, reason int, missing *LineError) {
	e.mu.Lock()
	cancelled, abort := j.cancelled, j.abort
	e.mu.Unlock()
	if cancelled || abort != nil {
		reason = reasonHalted
	}
	skip := errCancelledLine
	if missing != nil {
		skip = *missing
	}
	switch {
	case abort != nil:
		skip = *abort
	case cancelled:
		skip = errCancelledLine
	case reason == reasonExpired:
		skip = errExpiredLine
	}
	if reason != reasonNone || missing != nil {
		err := in.lines(j.rec.Batch.Endpoint, func(ln inputLine) bool {
			if !st.isDone(ln.CustomID) {
				res.add(skippedLine(ln.CustomID, skip.Code, skip.Message), false)
			}
			return true
		})
		if err != nil && e.ctx.Err() != nil {
			return
		}
	}
	if !e.checkpoint(j, res, st) {
		return
	}
	var errs []LineError
	if abort != nil {
		errs = append(errs, *abort)
	}
	e.finish(j, reason, errs, st)
}

// dispatch starts each unfinished line under the batch and global
// concurrency bounds until all ran, the batch is cancelled or ended
// early, it expires or the engine stops; it returns after every started
// line finished.
func (e *Engine) dispatch(j *job, in *input, st *progress, caller Caller, header http.Header, res *results) int {
	var (
		wg        sync.WaitGroup
		sem       = make(chan struct{}, e.cfg.Concurrency)
		reason    = reasonNone
		endpoint  = j.rec.Batch.Endpoint
		expiresAt = *j.rec.Batch.ExpiresAt
	)
	err := in.lines(endpoint, func(ln inputLine) bool {
		if st.isDone(ln.CustomID) {
			return true
		}
		if reason = e.acquire(j, sem); reason != reasonNone {
			return false
		}
		// Checked once a slot is free: a line that waited for one must
		// not start after the window ended.
		if e.cfg.Now().Unix() >= expiresAt {
			e.release(sem)
			reason = reasonExpired
			return false
		}
		// The route that created the batch, as configured now: a reload
		// that removed or changed it ends the batch rather than run it
		// under another route's egress policy.
		runner := e.runnerFor(caller.Route)
		if runner == nil {
			e.release(sem)
			e.abortWith(j, abortRoute)
			reason = reasonHalted
			return false
		}
		// Lines finished meanwhile are recorded before another starts:
		// an instance that lost the batch (owns) learns it here, before
		// it starts a line the new owner runs too.
		if res.len() >= e.cfg.CheckpointEvery && !e.checkpoint(j, res, st) {
			e.release(sem)
			reason = reasonStopped
			return false
		}
		st.setDispatched(ln.CustomID, true)
		wg.Add(1)
		go func(ln inputLine) {
			defer wg.Done()
			defer e.release(sem)
			// The line's charge rides with its request, so a run of a
			// line another run already charged is charged nothing.
			ctx := withCharge(e.ctx, e.chargeFor(j, ln.CustomID))
			status, body, err := runner.Run(ctx, caller, http.MethodPost, endpoint, header.Clone(), ln.Body)
			if e.ctx.Err() != nil {
				return // engine stopping: not recorded, so a resume re-runs it
			}
			if errors.Is(err, ErrCallerRevoked) {
				st.setDispatched(ln.CustomID, false) // not run: listed as skipped
				e.abortWith(j, abortRevoked)
				return
			}
			line, ok := resultLine(ln.CustomID, status, body, err)
			res.add(line, ok)
			e.mu.Lock()
			if ok {
				j.rec.Batch.RequestCounts.Completed++
			} else {
				j.rec.Batch.RequestCounts.Failed++
			}
			e.mu.Unlock()
		}(ln)
		return true
	})
	wg.Wait()
	if e.ctx.Err() != nil {
		e.checkpoint(j, res, st)
		return reasonStopped
	}
	if err != nil && reason == reasonNone {
		e.abortWith(j, errInputUnavailable)
		reason = reasonHalted
	}
	return reason
}

// acquire takes a slot of the batch and of the process, or reports why
// the batch must stop starting lines.
func (e *Engine) acquire(j *job, sem chan struct{}) int {
	select {
	case sem <- struct{}{}:
	case <-j.stop:
		return reasonHalted
	case <-e.ctx.Done():
		return reasonStopped
	}
	select {
	case e.global <- struct{}{}:
	case <-j.stop:
		<-sem
		return reasonHalted
	case <-e.ctx.Done():
		<-sem
		return reasonStopped
	}
	// Both slots and a stop may be ready at once; select picks at
	// random, so look again: a stopped batch starts no new line.
	select {
	case <-j.stop:
		e.release(sem)
		return reasonHalted
	default:
		return reasonNone
	}
}

func (e *Engine) release(sem chan struct{}) {
	<-e.global
	<-sem
}

// checkpoint writes the lines finished since the last one as new parts,
// then the record; and picks up a cancel recorded by another instance.
// Storage errors pause the batch here, retried until they pass; false
// means the engine stopped first (the lines not written run again at
// the resume).
func (e *Engine) checkpoint(j *job, res *results, st *progress) bool {
	if !e.owns(j) {
		return false
	}
	out, errs := res.take()
	ws, id := j.rec.Caller.WorkspaceID, j.rec.Batch.ID
	for _, p := range []struct {
		kind  string
		lines [][]byte
	}{{"out", out}, {"err", errs}} {
		if len(p.lines) == 0 {
			continue
		}
		st.seq++
		key := fmt.Sprintf("%s/%s-%08d.jsonl", e.partsDir(ws, id), p.kind, st.seq)
		data := append(bytes.Join(p.lines, []byte("\n")), '\n')
		if err := e.retry(id, "results", func(ctx context.Context) error { return e.cfg.KV.Store(ctx, key, data) }); err != nil {
			e.cfg.Logger.Error("batch: storing results", zap.String("batch_id", id), zap.Error(err))
			return false
		}
		st.mu.Lock()
		for _, l := range p.lines {
			st.done[customIDOf(l)] = true
		}
		if p.kind == "out" {
			st.outBytes += int64(len(data))
		}
		over := st.outBytes > e.cfg.Files.MaxBytes()
		st.mu.Unlock()
		if over {
			e.abortWith(j, outputTooLarge(e.cfg.Files.MaxBytes()))
		}
	}
	if e.leaser() != nil {
		return e.store(j) // the lease watcher picks up cancels; owns was asked above
	}
	ctx, cancel := ioCtx()
	stored, err := e.loadKey(ctx, e.key(ws, id))
	cancel()
	if err == nil && stored.Batch.Status == StatusCancelling {
		e.mu.Lock()
		if !j.cancelled && j.abort == nil {
			j.cancelled = true
			j.rec.Batch.Status, j.rec.Batch.CancellingAt = StatusCancelling, stored.Batch.CancellingAt
			j.halt()
		}
		e.mu.Unlock()
	}
	return e.persist(j)
}

// persistIfLive stores the record unless the batch is terminal or lost
// (the lease watcher's writes); false when it could not.
func (e *Engine) persistIfLive(j *job) bool { return e.persist(j) }

// persist saves a snapshot of the record, taken under the lock and
// written without it, retrying through a store outage; false when the
// engine stopped first or the batch is not this instance's any more
// (owns).
func (e *Engine) persist(j *job) bool {
	if !e.owns(j) {
		return false
	}
	return e.store(j)
}

// store is persist without asking owns, for a caller that just did.
func (e *Engine) store(j *job) bool {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	e.mu.Lock()
	if j.lost {
		e.mu.Unlock()
		return false
	}
	if j.final {
		e.mu.Unlock()
		return true
	}
	snap := *j.rec
	snap.Batch = *j.rec.Batch.clone()
	e.mu.Unlock()
	err := e.retry(snap.Batch.ID, "record", func(ctx context.Context) error { return e.save(ctx, &snap) })
	if err != nil {
		e.cfg.Logger.Error("batch: storing record", zap.String("batch_id", snap.Batch.ID), zap.Error(err))
		return false
	}
	return true
}

// partKeys returns the batch's part keys in write order; ok is false when
// the engine stopped while storage was down.
func (e *Engine) partKeys(ws, id string) (out []string, ok bool) {
	var keys []string
	err := e.retry(id, "list results", func(ctx context.Context) (err error) {
		keys, err = files.ListKeys(ctx, e.cfg.KV, e.partsDir(ws, id), false)
		return err
	})
	if err != nil && !permanent(err) {
		return nil, false
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ".jsonl") {
			out = append(out, k)
		}
	}
	// Sort by the sequence number after the kind, so write order holds
	// across "out" and "err" parts.
	sort.Slice(out, func(a, b int) bool { return out[a][len(out[a])-14:] < out[b][len(out[b])-14:] })
	return out, true
}

// loadPart reads one part, retrying through a store outage; a part gone
// meanwhile reads as empty. ok is false when the engine stopped first.
func (e *Engine) loadPart(id, key string) (b []byte, ok bool) {
	err := e.retry(id, "read results", func(ctx context.Context) (err error) {
		b, err = e.cfg.KV.Load(ctx, key)
		return err
	})
	if err != nil && !permanent(err) {
		return nil, false
	}
	return b, true
}

func isOutPart(key string) bool {
	return strings.Contains(key[strings.LastIndexByte(key, '/'):], "/out-")
}

// loadParts reads what earlier runs recorded: finished custom_ids, the
// last part number, output bytes and the counts. ok is false when the
// engine stopped first.
func (e *Engine) loadParts(ws, id string) (st *progress, completed, failed int, ok bool) {
	st = &progress{done: map[string]bool{}, dispatched: map[string]bool{}}
	keys, ok := e.partKeys(ws, id)
	if !ok {
		return nil, 0, 0, false
	}
	for _, k := range keys {
		b, ok := e.loadPart(id, k)
		if !ok {
			return nil, 0, 0, false
		}
		var n int
		if _, err := fmt.Sscanf(k[len(k)-14:], "%08d.jsonl", &n); err == nil && n > st.seq {
			st.seq = n
		}
		isOut := isOutPart(k)
		if isOut {
			st.outBytes += int64(len(b))
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if cid := customIDOf(line); cid != "" && !st.done[cid] {
				st.done[cid] = true
				if isOut {
					completed++
				} else {
					failed++
				}
			}
		}
	}
	return st, completed, failed, true
}

func (e *Engine) dropParts(j *job) {
	keys, _ := e.partKeys(j.rec.Caller.WorkspaceID, j.rec.Batch.ID)
	ctx, cancel := ioCtx()
	defer cancel()
	for _, k := range keys {
		_ = e.cfg.KV.Delete(ctx, k)
	}
}

// resume handles this instance's unfinished batches after a restart.
// Resumable ones (no in-memory-only headers) continue from the lines not
// yet recorded; lines that finished after the last checkpoint run again.
// The others end as failed with code "gateway_restarted", their recorded
// results delivered, since the credentials they ran with were never
// written to storage.
func (e *Engine) resume() {
	ctx, cancel := ioCtx()
	keys, err := files.ListKeys(ctx, e.cfg.KV, e.cfg.Prefix, true)
	cancel()
	if err != nil {
		e.cfg.Logger.Error("batch: scanning for unfinished batches", zap.Error(err))
		return
	}
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") || strings.Contains(k, ".parts/") || e.ctx.Err() != nil {
			continue
		}
		ctx, cancel := ioCtx()
		rec, err := e.loadKey(ctx, k)
		cancel()
		if err != nil || rec.Instance != e.cfg.Instance || Terminal(rec.Batch.Status) {
			continue
		}
		e.mu.Lock()
		_, running := e.running[rec.Batch.ID]
		e.mu.Unlock()
		if running {
			continue
		}
		e.start(rec, false, false)
	}
}

// customIDOf reads the custom_id of a result line.
func customIDOf(line []byte) string {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return ""
	}
	return gjsonString(line, "custom_id")
}
