package batches

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

// fileTimeout bounds the creation of one result file (up to the store's
// size limit, written a chunk at a time).
const fileTimeout = 10 * time.Minute

// errStopped ends a result file's read when the engine stops while
// storage is down; the batch is then finished at the next start.
var errStopped = errors.New("batches: engine stopped")

// assembled is what finishing a batch stored: its files and their line
// counts, which become the batch's request_counts, so the counts are
// always the lines in the files.
type assembled struct {
	outID, errID       *string
	outLines, errLines int
	problems           []LineError
}

// assemble joins the parts into an output file and an error file (each
// created only when it has lines) in the caller's workspace, reading one
// part at a time. Output parts beyond the store's size limit are not
// lost: each of their lines goes to the error file as an
// output_too_large error. ok is false when the engine stopped first.
func (e *Engine) assemble(j *job) (asm assembled, ok bool) {
	ws, id := j.rec.Caller.WorkspaceID, j.rec.Batch.ID
	keys, ok := e.partKeys(ws, id)
	if !ok {
		return asm, false
	}
	var outKeys, errKeys []string
	for _, k := range keys {
		if isOutPart(k) {
			outKeys = append(outKeys, k)
		} else {
			errKeys = append(errKeys, k)
		}
	}
	// overflow is the output that did not fit: parts from the first
	// one cut, starting at byte from of it.
	var (
		overflow []string
		from     int
	)
	limit := e.cfg.Files.MaxBytes()
	// outSeen holds the custom_ids in the output file: a result recorded
	// twice (by an owner that lost its lease while another instance ran
	// the line again) is delivered once, the first recorded.
	var outSeen map[string]bool
	if len(outKeys) > 0 {
		var total int64
		f, err := e.createFile(ws, id, "output", func() io.Reader {
			asm.outLines, total, overflow, from = 0, 0, nil, 0
			outSeen = map[string]bool{}
			return files.NewChunkReader(len(outKeys), func(i int) ([]byte, error) {
				b, ok := e.loadPart(id, outKeys[i])
				if !ok {
					return nil, errStopped
				}
				if len(overflow) == 0 {
					b = firstResults(b, outSeen, nil)
				}
				if len(overflow) > 0 {
					overflow = append(overflow, outKeys[i])
					return nil, nil
				}
				if total+int64(len(b)) > limit {
					// Whole lines up to the limit stay in the output.
					fit := fitLines(b, limit-total)
					overflow, from, b = []string{outKeys[i]}, fit, b[:fit]
				}
				total += int64(len(b))
				asm.outLines += bytes.Count(b, []byte("\n"))
				return b, nil
			})
		})
		switch {
		case errors.Is(err, errStopped) || e.ctx.Err() != nil:
			return asm, false
		case err != nil:
			e.cfg.Logger.Error("batch: storing the output file", zap.String("batch_id", id), zap.Error(err))
			asm.outLines, overflow, from = 0, outKeys, 0
		case asm.outLines == 0:
			_ = e.deleteFile(ws, f.ID)
		default:
			asm.outID = ptr(f.ID)
		}
		if len(overflow) > 0 {
			asm.problems = append(asm.problems, outputTooLarge(limit))
		}
	}
	all := append(errKeys[:len(errKeys):len(errKeys)], overflow...)
	if len(all) > 0 {
		tooLarge := outputTooLarge(limit)
		var errSeen map[string]bool
		f, err := e.createFile(ws, id, "error", func() io.Reader {
			asm.errLines = 0
			errSeen = map[string]bool{}
			return files.NewChunkReader(len(all), func(i int) ([]byte, error) {
				b, ok := e.loadPart(id, all[i])
				if !ok {
					return nil, errStopped
				}
				if i < len(errKeys) {
					b = firstResults(b, errSeen, outSeen)
				}
				if i == len(errKeys) {
					b = b[min(from, len(b)):]
				}
				if i >= len(errKeys) {
					b = asErrors(b, tooLarge)
				}
				asm.errLines += bytes.Count(b, []byte("\n"))
				return b, nil
			})
		})
		switch {
		case errors.Is(err, errStopped) || e.ctx.Err() != nil:
			return asm, false
		case err != nil:
			e.cfg.Logger.Error("batch: storing the error file", zap.String("batch_id", id), zap.Error(err))
			asm.errLines = 0
			asm.problems = append(asm.problems, LineError{Code: "error_file_too_large", Message: fmt.Sprintf(
				"the batch's error file exceeds the file store's limit of %d bytes and could not be stored", limit)})
		case asm.errLines == 0:
			_ = e.deleteFile(ws, f.ID)
		default:
			asm.errID = ptr(f.ID)
		}
	}
	return asm, true
}

// fitLines returns the length of the longest prefix of b made of whole
// lines that is at most room bytes.
func fitLines(b []byte, room int64) int {
	if room <= 0 {
		return 0
	}
	if int64(len(b)) > room {
		b = b[:room]
	}
	return bytes.LastIndexByte(b, '\n') + 1
}

// asErrors turns the output lines of part into error lines of why,
// keeping their custom_ids.
func asErrors(part []byte, why LineError) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(part, []byte("\n")) {
		if cid := customIDOf(line); cid != "" {
			out.Write(skippedLine(cid, why.Code, why.Message))
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// createFile stores a result file read from a fresh mk() per attempt,
// retrying through a store outage.
func (e *Engine) createFile(ws, batchID, name string, mk func() io.Reader) (*files.File, error) {
	var f *files.File
	err := e.retry(batchID, "result file", func(context.Context) error {
		ctx, cancel := context.WithTimeout(context.Background(), fileTimeout)
		defer cancel()
		var err error
		f, err = e.cfg.Files.CreateFrom(ctx, ws, batchID+"_"+name+".jsonl", files.PurposeBatchOutput, mk())
		if errors.Is(err, errStopped) {
			return &stopErr{}
		}
		return err
	})
	if _, ok := err.(*stopErr); ok {
		return nil, errStopped
	}
	return f, err
}

// stopErr makes errStopped permanent for retry (it is an engine stop, not
// a storage error).
type stopErr struct{}

func (*stopErr) Error() string { return errStopped.Error() }

func (e *Engine) deleteFile(ws, id string) error {
	ctx, cancel := ioCtx()
	defer cancel()
	return e.cfg.Files.Delete(ctx, ws, id)
}

// finish assembles the result files and moves the batch to its terminal
// status: failed when errs (or assembling) name a problem, else
// cancelled, expired or completed by reason. request_counts become the
// lines in the files; a batch that ran with fewer results than lines
// fails with results_incomplete rather than report completion. Nothing
// is published when the engine stops first: the batch finishes at the
// next start.
func (e *Engine) finish(j *job, reason int, errs []LineError, st *progress) {
	if reason == reasonNone && len(errs) == 0 {
		e.mu.Lock()
		j.rec.Batch.Status, j.rec.Batch.FinalizingAt = StatusFinalizing, ptr(e.cfg.Now().Unix())
		e.mu.Unlock()
		if !e.persist(j) {
			return
		}
	}
	asm, ok := e.assemble(j)
	if !ok {
		return
	}
	for _, p := range asm.problems {
		if !hasCode(errs, p.Code) {
			errs = append(errs, p)
		}
	}
	e.mu.Lock()
	cancelled := j.cancelled
	e.mu.Unlock()
	now := e.cfg.Now().Unix()
	ok = e.publish(j, func(b *Batch) {
		b.OutputFileID, b.ErrorFileID = asm.outID, asm.errID
		if st != nil || asm.outLines+asm.errLines > 0 {
			b.RequestCounts.Completed, b.RequestCounts.Failed = asm.outLines, asm.errLines
		}
		if st != nil && len(errs) == 0 && b.RequestCounts.Completed+b.RequestCounts.Failed != b.RequestCounts.Total {
			errs = append(errs, LineError{Code: "results_incomplete", Message: fmt.Sprintf(
				"the result files hold %d of the batch's %d requests", b.RequestCounts.Completed+b.RequestCounts.Failed, b.RequestCounts.Total)})
		}
		switch {
		case len(errs) > 0:
			b.Status, b.FailedAt = StatusFailed, ptr(now)
			b.Errors = &Errors{Object: "list", Data: errs}
		case reason == reasonHalted && cancelled:
			b.Status, b.CancelledAt = StatusCancelled, ptr(now)
		case reason == reasonExpired:
			b.Status, b.ExpiredAt = StatusExpired, ptr(now)
		default:
			b.Status, b.CompletedAt = StatusCompleted, ptr(now)
		}
	})
	if ok {
		e.dropParts(j)
		e.dropCharges(j.rec.Caller.WorkspaceID, j.rec.Batch.ID)
		if e.leaser() != nil {
			e.dropMarks(j)
		}
	}
}

func hasCode(errs []LineError, code string) bool {
	for _, e := range errs {
		if e.Code == code {
			return true
		}
	}
	return false
}

// publish applies a terminal change: it is stored first (retried
// through a store outage) and shown live after, so no reader sees a
// terminal status that storage lacks. false when the engine stopped
// first.
func (e *Engine) publish(j *job, change func(*Batch)) bool {
	if !e.owns(j) {
		return false
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	e.mu.Lock()
	if j.lost {
		e.mu.Unlock()
		return false
	}
	snap := *j.rec
	snap.Batch = *j.rec.Batch.clone()
	e.mu.Unlock()
	change(&snap.Batch)
	if err := e.retry(snap.Batch.ID, "record", func(ctx context.Context) error { return e.save(ctx, &snap) }); err != nil {
		e.cfg.Logger.Error("batch: storing record", zap.String("batch_id", snap.Batch.ID), zap.Error(err))
		return false
	}
	e.mu.Lock()
	j.rec.Batch = snap.Batch
	j.final = true
	e.mu.Unlock()
	return true
}

// firstResults drops from part b the lines whose custom_id is in seen or
// in also, and adds the others' to seen; b is returned as it is when no
// line goes.
func firstResults(b []byte, seen, also map[string]bool) []byte {
	var out []byte
	dropped := false
	for rest := b; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		cid := customIDOf(line)
		if cid != "" && (seen[cid] || also[cid]) {
			if !dropped {
				dropped = true
				out = append(out, b[:len(b)-len(line)-len(rest)]...)
			}
			continue
		}
		if cid != "" {
			seen[cid] = true
		}
		if dropped {
			out = append(out, line...)
		}
	}
	if !dropped {
		return b
	}
	return out
}
