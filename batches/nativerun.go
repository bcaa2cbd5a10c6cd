package batches

import (
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Polling of a provider job: the first look comes soon (small jobs end
// in seconds), then the interval doubles up to nativePollMax, so a job of
// a day costs a few thousand calls, not one per second.
const (
	nativePollMin = 200 * time.Millisecond
	nativePollMax = 30 * time.Second
)

// Early ends of a native batch.
var (
	errSubmitInterrupted = LineError{Code: "native_submit_interrupted",
		Message: "the gateway stopped while it submitted the batch to the provider; it was not submitted again, so that it never runs twice (look for the job in the provider's console)"}
	errJobGone = LineError{Code: "provider_job_unavailable",
		Message: "the provider no longer knows the batch's job"}
	errResultsGone = LineError{Code: "provider_results_unavailable",
		Message: "the provider refused to give the batch's job results"}
	errResultMissing = LineError{Code: "native_result_missing",
		Message: "the provider's results did not include this request"}
)

// codeJobFailed is the error code of a batch whose provider job failed
// as a whole (its message is the provider's reason).
const codeJobFailed = "provider_job_failed"

func submitFailed(err error) LineError {
	msg := "the provider could not be reached to create the batch's job; it was not retried, so that it never runs twice"
	if ae := new(apierror.Error); errors.As(err, &ae) {
		msg = "the provider refused the batch's job: " + ae.Message
	}
	return LineError{Code: "native_submit_failed", Message: msg}
}

// nativeJobs returns the job API of j's route as configured now, or why
// the batch must end (route gone or changed, key revoked).
func (e *Engine) nativeJobs(j *job, caller Caller, header http.Header, provider string) (NativeJobs, *LineError) {
	nr, ok := e.runnerFor(caller.Route).(NativeRunner)
	if !ok {
		return nil, &abortRoute
	}
	api, err := nr.NativeJobs(e.ctx, caller, header, provider, j.rec.Batch.ID)
	switch {
	case errors.Is(err, ErrCallerRevoked):
		return nil, &abortRevoked
	case err != nil:
		return nil, &abortRoute
	}
	return api, nil
}

// driveNative runs an in-progress native batch from submission to its
// results; drive called it after validation, with the batch's recorded
// progress st. It returns without finishing when the engine stops or
// the batch is lost to another instance.
func (e *Engine) driveNative(j *job, in *input, st *progress, caller Caller, header http.Header) {
	ns := e.native(j)
	api, why := e.nativeJobs(j, caller, header, ns.Provider)
	if why != nil {
		e.abortWith(j, *why)
		e.endNative(j, in, st, reasonHalted)
		return
	}
	res := &results{}
	if ns.JobID == "" {
		e.mu.Lock()
		halted := j.stopped
		e.mu.Unlock()
		if halted {
			// Cancelled (or ended) before its job was created: no job.
			e.endNative(j, in, st, reasonHalted)
			return
		}
		if ns.Submitting {
			e.abortWith(j, errSubmitInterrupted)
			e.endNative(j, in, st, reasonHalted)
			return
		}
		if !e.submitNative(j, in, st, api, res) {
			return
		}
		ns = e.native(j)
	}
	reason := reasonNone
	if ns.JobID != "" {
		var ok bool
		if reason, ok = e.pollNative(j, api, ns.JobID); !ok {
			return
		}
		// A job gone or failed as a whole has no results to read.
		if ab := e.abortOf(j); (ab == nil || (ab.Code != errJobGone.Code && ab.Code != codeJobFailed)) && !e.collectNative(j, in, st, api, ns.JobID, res) {
			return
		}
	}
	if !e.checkpoint(j, res, st) {
		return
	}
	e.endNative(j, in, st, reason)
}

// submitNative creates the batch's provider job and stores its id. A
// line that does not translate goes to the error file with the answer
// an on-demand call would have got. false when the batch ended or the
// engine stopped.
func (e *Engine) submitNative(j *job, in *input, st *progress, api NativeJobs, res *results) bool {
	e.setNative(j, func(n *nativeState) { n.Submitting = true })
	if !e.persist(j) {
		return false
	}
	endpoint := j.rec.Batch.Endpoint
	var cids []string
	lines := func(fn func(id string, body []byte) error) error {
		cids = cids[:0]
		var ferr error
		err := in.lines(endpoint, func(ln inputLine) bool {
			cids = append(cids, ln.CustomID)
			ferr = fn(nativeID(len(cids)-1), ln.Body)
			return ferr == nil
		})
		if ferr != nil {
			return ferr
		}
		return err
	}
	rejected := 0
	reject := func(id string, err error) {
		n := nativeIndex(id)
		if n < 0 || n >= len(cids) {
			return
		}
		rejected++
		line, _ := resultLine(cids[n], 0, nil, err)
		res.add(line, false)
	}
	jobID, err := api.Submit(e.ctx, lines, reject)
	if err != nil {
		if e.ctx.Err() != nil {
			// Stopping: whether the job exists is unknown, as after a
			// crash; the next owner fails the batch rather than resubmit.
			return false
		}
		e.cfg.Logger.Warn("batch: submitting to the provider failed", zap.String("batch_id", j.rec.Batch.ID), zap.Error(err))
		e.abortWith(j, submitFailed(err))
		res.take() // the lines are all listed as not run
		e.setNative(j, func(n *nativeState) { n.Submitting = false })
		e.endNative(j, in, st, reasonHalted)
		return false
	}
	// The job's id first: nothing else may be written, or fail, before
	// the record names the job.
	e.setNative(j, func(n *nativeState) { n.JobID, n.Submitting, n.Rejected = jobID, false, rejected })
	e.mu.Lock()
	j.rec.Batch.RequestCounts.Failed += rejected
	e.mu.Unlock()
	if !e.persist(j) {
		return false
	}
	e.cfg.Logger.Info("batch: submitted to the provider", zap.String("batch_id", j.rec.Batch.ID), zap.String("provider", e.native(j).Provider),
		zap.String("job_id", jobID), zap.Int("rejected", rejected))
	return true
}

// pollNative waits for the job to end, keeping request_counts current,
// asking the provider to stop it on a cancel, an early end or the end of
// the batch's window. reason is how the batch ends (reasonExpired when
// its window or the provider's ended first); ok is false when the engine
// stopped or the batch was lost.
func (e *Engine) pollNative(j *job, api NativeJobs, jobID string) (reason int, ok bool) {
	wait := nativePollMin
	stop := j.stop
	expiresAt := *j.rec.Batch.ExpiresAt
	for {
		e.mu.Lock()
		lost, halted := j.lost, j.stopped
		e.mu.Unlock()
		if lost {
			return 0, false
		}
		expired := e.cfg.Now().Unix() >= expiresAt
		if ns := e.native(j); !ns.CancelSent && (halted || expired) {
			if err := api.Cancel(e.ctx, jobID); err != nil {
				e.cfg.Logger.Warn("batch: cancelling the provider job failed", zap.String("batch_id", j.rec.Batch.ID), zap.Error(err))
			} else {
				e.setNative(j, func(n *nativeState) { n.CancelSent, n.Expired = true, expired && !halted })
				if !e.persist(j) {
					return 0, false
				}
			}
		}
		job, err := api.Get(e.ctx, jobID)
		switch {
		case e.ctx.Err() != nil:
			return 0, false
		case err != nil:
			if ae := new(apierror.Error); errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				e.abortWith(j, errJobGone)
				return reasonHalted, true
			}
			e.cfg.Logger.Warn("batch: reading the provider job failed", zap.String("batch_id", j.rec.Batch.ID), zap.Error(err))
		default:
			e.mu.Lock()
			c := &j.rec.Batch.RequestCounts
			c.Completed = job.Succeeded
			c.Failed = job.Errored + job.Canceled + job.Expired + j.rec.Native.Rejected
			e.mu.Unlock()
			if job.Ended {
				if job.Failure != "" {
					e.abortWith(j, LineError{Code: codeJobFailed, Message: job.Failure})
					return reasonHalted, true
				}
				if e.native(j).Expired || job.Expired > 0 || job.WindowEnded {
					return reasonExpired, true
				}
				return reasonNone, true
			}
		}
		select {
		case <-time.After(wait):
		case <-stop:
			stop = nil // seen: the cancel is sent above, then polling goes on
		case <-e.ctx.Done():
			return 0, false
		}
		wait = min(2*wait, nativePollMax)
	}
}

// collectNative reads the ended job's results into parts: each answer,
// translated back, in the output or error file under its custom_id,
// canceled and expired lines as not run. Each line is charged once, by
// the run that claims it. false when the engine stopped or the batch
// was lost.
func (e *Engine) collectNative(j *job, in *input, st *progress, api NativeJobs, jobID string, res *results) bool {
	var cids, models []string
	err := in.lines(j.rec.Batch.Endpoint, func(ln inputLine) bool {
		cids, models = append(cids, ln.CustomID), append(models, gjsonString(ln.Body, "model"))
		return true
	})
	if err != nil {
		if e.ctx.Err() == nil {
			e.abortWith(j, errInputUnavailable)
		}
		return e.ctx.Err() == nil
	}
	expired := e.native(j).Expired
	wait := nativePollMin
	for {
		err := api.Results(e.ctx, jobID, func(r *NativeResult) error {
			n := nativeIndex(r.ID)
			if n < 0 || n >= len(cids) || st.isDone(cids[n]) {
				return nil
			}
			cid := cids[n]
			var line []byte
			ok := false
			switch r.Kind {
			case providers.BatchSucceeded, providers.BatchErrored:
				if r.Record != nil {
					ch := e.chargeFor(j, cid)
					ctx, cancel := ioCtx()
					if first, err := ch.Claim(ctx); first || err != nil {
						r.Record(ctx, ch, models[n])
					}
					cancel()
				}
				line, ok = resultLine(cid, r.Status, r.Body, nil)
			case providers.BatchExpired:
				line = skippedLine(cid, errExpiredLine.Code, errExpiredLine.Message)
			default:
				skip := errCancelledLine
				if expired {
					skip = errExpiredLine
				} else if ab := e.abortOf(j); ab != nil {
					skip = *ab
				}
				line = skippedLine(cid, skip.Code, skip.Message)
			}
			res.add(line, ok)
			st.setDispatched(cid, true)
			if res.len() >= e.cfg.CheckpointEvery && !e.checkpoint(j, res, st) {
				return errStopped
			}
			return nil
		})
		switch {
		case err == nil:
			return true
		case errors.Is(err, errStopped) || e.ctx.Err() != nil:
			return false
		}
		if ae := new(apierror.Error); errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
			// The provider will not give the results: the lines without
			// one are listed as missing.
			e.cfg.Logger.Warn("batch: the provider refused the job's results", zap.String("batch_id", j.rec.Batch.ID), zap.Error(err))
			e.abortWith(j, errResultsGone)
			return true
		}
		e.cfg.Logger.Warn("batch: reading the provider job's results failed", zap.String("batch_id", j.rec.Batch.ID), zap.Error(err))
		if !e.owns(j) {
			return false
		}
		select {
		case <-time.After(wait):
		case <-e.ctx.Done():
			return false
		}
		wait = min(2*wait, nativePollMax)
	}
}

func (e *Engine) abortOf(j *job) *LineError {
	e.mu.Lock()
	defer e.mu.Unlock()
	return j.abort
}

// endNative lists the lines without a result (never submitted, or
// missing from the provider's results) in the error file and finishes
// the batch.
func (e *Engine) endNative(j *job, in *input, st *progress, reason int) {
	e.finishRest(j, in, st, &results{}, reason, &errResultMissing)
}
