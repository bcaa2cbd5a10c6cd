package batches

import (
	"bytes"
	"context"
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
	reasonNone = iota
	reasonCancelled
	reasonExpired
	reasonStopped
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

	input := j.input
	j.input = nil // the driver owns it now; drop the reference early
	if input == nil {
		ctx, cancel := ioCtx()
		var err error
		input, err = e.readInput(ctx, caller, header, b.InputFileID)
		cancel()
		if err != nil {
			e.fail(j, []LineError{{Code: "input_file_unavailable", Message: "the input file could not be read to resume the batch"}})
			return
		}
	}
	lines, lineErrs := parseInput(input, b.Endpoint, e.cfg.MaxLines)
	input = nil
	if b.Status == StatusValidating {
		if len(lineErrs) > 0 {
			e.fail(j, lineErrs)
			return
		}
		e.mu.Lock()
		if j.rec.Batch.Status == StatusValidating {
			j.rec.Batch.Status = StatusInProgress
		}
		j.rec.Batch.InProgressAt = ptr(e.cfg.Now().Unix())
		j.rec.Batch.RequestCounts.Total = len(lines)
		e.mu.Unlock()
	}
	done, seq, completed, failed := e.loadParts(ws, id)
	e.mu.Lock()
	j.rec.Batch.RequestCounts = RequestCounts{Total: len(lines), Completed: completed, Failed: failed}
	e.mu.Unlock()
	e.persist(j)

	res := &results{}
	reason, dispatched := e.dispatch(j, lines, done, caller, header, res, &seq)
	if reason == reasonStopped {
		return // unfinished in storage; resumed at the next Start
	}
	e.mu.Lock()
	if j.cancelled {
		reason = reasonCancelled
	}
	e.mu.Unlock()
	if reason != reasonNone {
		code, msg := "batch_cancelled", "the batch was cancelled before this request ran"
		if reason == reasonExpired {
			code, msg = "batch_expired", "this request could not be executed before the completion window ended"
		}
		n := 0
		for _, ln := range lines {
			if !done[ln.CustomID] && !dispatched[ln.CustomID] {
				res.add(skippedLine(ln.CustomID, code, msg), false)
				n++
			}
		}
		e.mu.Lock()
		j.rec.Batch.RequestCounts.Failed += n
		e.mu.Unlock()
	}
	e.checkpoint(j, res, &seq)
	e.finalize(j, reason)
}

// dispatch starts each unfinished line under the batch and global
// concurrency bounds until all ran, the batch is cancelled, it expires or
// the engine stops; it returns after every started line finished.
func (e *Engine) dispatch(j *job, lines []inputLine, done map[string]bool, caller Caller, header http.Header,
	res *results, seq *int) (int, map[string]bool) {
	var (
		wg         sync.WaitGroup
		sem        = make(chan struct{}, e.cfg.Concurrency)
		dispatched = map[string]bool{}
		reason     = reasonNone
		endpoint   = j.rec.Batch.Endpoint
		expiresAt  = *j.rec.Batch.ExpiresAt
	)
	defer wg.Wait()
	for _, ln := range lines {
		if done[ln.CustomID] {
			continue
		}
		if reason = e.acquire(j, sem); reason != reasonNone {
			break
		}
		// Checked once a slot is free: a line that waited for one must
		// not start after the window ended.
		if e.cfg.Now().Unix() >= expiresAt {
			e.release(sem)
			reason = reasonExpired
			break
		}
		runner, ok := e.currentRunner()
		if !ok {
			e.release(sem)
			reason = reasonStopped
			break
		}
		dispatched[ln.CustomID] = true
		wg.Add(1)
		go func(ln inputLine) {
			defer wg.Done()
			defer e.release(sem)
			status, body, err := runner.Run(e.ctx, caller, http.MethodPost, endpoint, header.Clone(), ln.Body)
			if e.ctx.Err() != nil {
				return // engine stopping: not recorded, so a resume re-runs it
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
		if res.len() >= e.cfg.CheckpointEvery {
			e.checkpoint(j, res, seq)
		}
	}
	wg.Wait()
	if e.ctx.Err() != nil {
		reason = reasonStopped
		e.checkpoint(j, res, seq)
	}
	return reason, dispatched
}

// acquire takes a slot of the batch and of the process, or reports why
// the batch must stop starting lines.
func (e *Engine) acquire(j *job, sem chan struct{}) int {
	select {
	case sem <- struct{}{}:
	case <-j.cancel:
		return reasonCancelled
	case <-e.ctx.Done():
		return reasonStopped
	}
	select {
	case e.global <- struct{}{}:
	case <-j.cancel:
		<-sem
		return reasonCancelled
	case <-e.ctx.Done():
		<-sem
		return reasonStopped
	}
	// Both slots and a cancel may be ready at once; select picks at
	// random, so look again: a cancelled batch starts no new line.
	select {
	case <-j.cancel:
		e.release(sem)
		return reasonCancelled
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
func (e *Engine) checkpoint(j *job, res *results, seq *int) {
	out, errs := res.take()
	ws, id := j.rec.Caller.WorkspaceID, j.rec.Batch.ID
	ctx, cancel := ioCtx()
	defer cancel()
	for _, p := range []struct {
		kind  string
		lines [][]byte
	}{{"out", out}, {"err", errs}} {
		if len(p.lines) == 0 {
			continue
		}
		*seq++
		key := fmt.Sprintf("%s/%s-%08d.jsonl", e.partsDir(ws, id), p.kind, *seq)
		if err := e.cfg.KV.Store(ctx, key, append(bytes.Join(p.lines, []byte("\n")), '\n')); err != nil {
			e.cfg.Logger.Error("batch: storing results", zap.String("batch_id", id), zap.Error(err))
		}
	}
	if stored, err := e.loadKey(ctx, e.key(ws, id)); err == nil && stored.Batch.Status == StatusCancelling {
		e.mu.Lock()
		if !j.cancelled {
			j.cancelled = true
			j.rec.Batch.Status, j.rec.Batch.CancellingAt = StatusCancelling, stored.Batch.CancellingAt
			close(j.cancel)
		}
		e.mu.Unlock()
	}
	e.persist(j)
}

// persist saves a snapshot of the record, taken under the lock and
// written without it.
func (e *Engine) persist(j *job) {
	e.mu.Lock()
	snap := *j.rec
	snap.Batch = *j.rec.Batch.clone()
	e.mu.Unlock()
	ctx, cancel := ioCtx()
	defer cancel()
	if err := e.save(ctx, &snap); err != nil {
		e.cfg.Logger.Error("batch: storing record", zap.String("batch_id", snap.Batch.ID), zap.Error(err))
	}
}

// partKeys returns the batch's part keys in write order.
func (e *Engine) partKeys(ctx context.Context, ws, id string) []string {
	keys, err := files.ListKeys(ctx, e.cfg.KV, e.partsDir(ws, id), false)
	if err != nil {
		e.cfg.Logger.Error("batch: listing results", zap.String("batch_id", id), zap.Error(err))
	}
	var out []string
	for _, k := range keys {
		if strings.HasSuffix(k, ".jsonl") {
			out = append(out, k)
		}
	}
	// Sort by the sequence number after the kind, so write order holds
	// across "out" and "err" parts.
	sort.Slice(out, func(a, b int) bool { return out[a][len(out[a])-14:] < out[b][len(out[b])-14:] })
	return out
}

// loadParts reads what earlier runs recorded: finished custom_ids, the
// last part number, and the counts.
func (e *Engine) loadParts(ws, id string) (done map[string]bool, seq, completed, failed int) {
	ctx, cancel := ioCtx()
	defer cancel()
	done = map[string]bool{}
	for _, k := range e.partKeys(ctx, ws, id) {
		b, err := e.cfg.KV.Load(ctx, k)
		if err != nil {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(k[len(k)-14:], "%08d.jsonl", &n); err == nil && n > seq {
			seq = n
		}
		isOut := strings.Contains(k[strings.LastIndexByte(k, '/'):], "/out-")
		for _, line := range bytes.Split(b, []byte("\n")) {
			if cid := customIDOf(line); cid != "" && !done[cid] {
				done[cid] = true
				if isOut {
					completed++
				} else {
					failed++
				}
			}
		}
	}
	return done, seq, completed, failed
}

// finalize assembles the output and error files from the parts and moves
// the batch to its terminal status.
func (e *Engine) finalize(j *job, reason int) {
	now := e.cfg.Now().Unix()
	e.mu.Lock()
	if reason == reasonNone {
		j.rec.Batch.Status, j.rec.Batch.FinalizingAt = StatusFinalizing, ptr(now)
	}
	e.mu.Unlock()
	e.persist(j)
	outID, errID := e.assemble(j)
	now = e.cfg.Now().Unix()
	e.publish(j, func(b *Batch) {
		b.OutputFileID, b.ErrorFileID = outID, errID
		switch reason {
		case reasonCancelled:
			b.Status, b.CancelledAt = StatusCancelled, ptr(now)
		case reasonExpired:
			b.Status, b.ExpiredAt = StatusExpired, ptr(now)
		default:
			b.Status, b.CompletedAt = StatusCompleted, ptr(now)
		}
	})
	e.dropParts(j)
}

// publish applies a terminal change: it is stored first and shown live
// after, so no reader sees a terminal status that storage lacks.
func (e *Engine) publish(j *job, change func(*Batch)) {
	e.mu.Lock()
	snap := *j.rec
	snap.Batch = *j.rec.Batch.clone()
	e.mu.Unlock()
	change(&snap.Batch)
	ctx, cancel := ioCtx()
	if err := e.save(ctx, &snap); err != nil {
		e.cfg.Logger.Error("batch: storing record", zap.String("batch_id", snap.Batch.ID), zap.Error(err))
	}
	cancel()
	e.mu.Lock()
	j.rec.Batch = snap.Batch
	e.mu.Unlock()
}

// fail ends a batch as failed with errs; partial results, if any, are
// still delivered.
func (e *Engine) fail(j *job, errs []LineError) {
	outID, errID := e.assemble(j)
	now := e.cfg.Now().Unix()
	e.publish(j, func(b *Batch) {
		b.Status, b.FailedAt = StatusFailed, ptr(now)
		b.Errors = &Errors{Object: "list", Data: errs}
		b.OutputFileID, b.ErrorFileID = outID, errID
	})
	e.dropParts(j)
}

// assemble joins the parts into an output file and an error file (each
// created only when it has lines) in the caller's workspace.
func (e *Engine) assemble(j *job) (outID, errID *string) {
	ws, id := j.rec.Caller.WorkspaceID, j.rec.Batch.ID
	ctx, cancel := ioCtx()
	defer cancel()
	var out, errs bytes.Buffer
	for _, k := range e.partKeys(ctx, ws, id) {
		b, err := e.cfg.KV.Load(ctx, k)
		if err != nil {
			continue
		}
		if strings.Contains(k[strings.LastIndexByte(k, '/'):], "/out-") {
			out.Write(b)
		} else {
			errs.Write(b)
		}
	}
	create := func(buf *bytes.Buffer, name string) *string {
		if buf.Len() == 0 {
			return nil
		}
		f, err := e.cfg.Files.Create(ctx, ws, id+"_"+name+".jsonl", files.PurposeBatchOutput, buf.Bytes())
		if err != nil {
			e.cfg.Logger.Error("batch: storing result file", zap.String("batch_id", id), zap.Error(err))
			return nil
		}
		return ptr(f.ID)
	}
	return create(&out, "output"), create(&errs, "error")
}

func (e *Engine) dropParts(j *job) {
	ctx, cancel := ioCtx()
	defer cancel()
	for _, k := range e.partKeys(ctx, j.rec.Caller.WorkspaceID, j.rec.Batch.ID) {
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
		j := &job{rec: rec, cancel: make(chan struct{})}
		if rec.Batch.Status == StatusCancelling {
			j.cancelled = true
			close(j.cancel)
		}
		if !rec.Resumable {
			e.fail(j, []LineError{{Code: "gateway_restarted", Message: "the gateway restarted while the batch ran; it was created with credentials the gateway does not store, so it could not resume"}})
			continue
		}
		e.cfg.Logger.Info("batch: resuming", zap.String("batch_id", rec.Batch.ID), zap.String("status", rec.Batch.Status))
		e.launch(j)
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
