package routing

import (
	"slices"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// leaf runs one leaf target: the response cache first (a cached answer
// needs no healthy upstream), then the breaker, then the attempt and its
// retries. Retries happen here, before any fallback sibling is tried.
func (r *run) leaf(t *Target) Outcome {
	if t.Unfit != nil {
		// Token preflight: the input cannot fit, so nothing is sent and
		// the strategy moves on as from an open breaker.
		r.skipUnfit(t)
		return Outcome{Status: 400, Skipped: true, ErrorType: providers.ErrContextLength}
	}
	if o, ok := r.exec.Cached(r.ctx, t); ok {
		r.res.Target, r.res.Retries = t, 0
		o.step = r.record(Step{Target: t, Status: o.Status, Outcome: StepCacheHit})
		return o
	}
	br := r.rt.Breakers
	if t.CB == nil {
		br = nil
	}
	var last Outcome
	for try := 0; ; try++ {
		var done func(Outcome)
		if br != nil {
			d, ok := br.Allow(t)
			if !ok {
				if try == 0 {
					r.skipped(t)
					return Outcome{Status: 503, Skipped: true}
				}
				// The breaker opened during our retries: stop, and let
				// the last real failure stand.
				r.unretry(last.step - 1)
				return last
			}
			done = d
		}
		var load *TargetLoad
		if r.rt.Loads != nil {
			load = r.rt.Loads.start(t)
		}
		start := r.rt.Now()
		o := r.exec.Attempt(r.ctx, t, try)
		took := r.rt.Now().Sub(start)
		if done != nil {
			done(o)
		}
		if load != nil {
			r.rt.Loads.finish(load, o, took)
		}
		r.res.Target, r.res.Retries = t, try
		wait, retry, label := r.retryWait(t, o, try)
		o.step = r.record(Step{Target: t, Try: try, Status: o.Status, Duration: took, Outcome: label})
		if !retry {
			return o
		}
		if err := r.rt.Sleep(r.ctx, wait); err != nil {
			// The client went away while we waited; it will never see
			// another answer, so stop here.
			return o
		}
		last = o
	}
}

// record appends a step and returns 1 + its index. An actual attempt
// confirms a pending fallback: the failure before it is relabelled.
func (r *run) record(s Step) int {
	if r.relabel >= 0 && r.relabel < len(r.res.Steps) && r.res.Steps[r.relabel].Outcome == StepError {
		r.res.Steps[r.relabel].Outcome = StepFallback
	}
	r.relabel = -1
	r.res.Steps = append(r.res.Steps, s)
	return len(r.res.Steps)
}

// unretry marks a step that was labelled a retry as the final failure,
// when the retry did not happen after all.
func (r *run) unretry(i int) {
	if i >= 0 && i < len(r.res.Steps) && r.res.Steps[i].Outcome == StepRetry {
		r.res.Steps[i].Outcome = StepError
	}
}

// retryWait decides whether o is retried on t, how long to wait first,
// and how the attempt is labelled in the log.
func (r *run) retryWait(t *Target, o Outcome, try int) (time.Duration, bool, string) {
	label := stepLabel(o)
	rc := t.Retry
	if rc == nil || try >= rc.Attempts || !Retryable(rc, o) || r.ctx.Err() != nil {
		return 0, false, label
	}
	if r.rt.Breakers != nil && t.CB != nil && r.rt.Breakers.Open(t) {
		return 0, false, label
	}
	wait := r.rt.Backoff(try)
	if rc.HonourRetryAfter() && o.HasRetryAfter {
		wait = o.RetryAfter
	}
	if r.rt.Now().Add(wait).After(r.deadline) {
		if label == StepError {
			label = StepRetryAfterTooLong
		}
		return 0, false, label
	}
	if label == StepError {
		label = StepRetry
	}
	return wait, true, label
}

// stepLabel names an attempt's outcome; a plain failure is StepError until
// the router decides to retry or fall back from it.
func stepLabel(o Outcome) string {
	switch {
	case o.Cause == CauseClientGone:
		return StepClientClosed
	case o.Cause == CauseStreamFailed:
		return StepStreamFailed
	case o.OK():
		return StepOK
	case o.Cause == CauseTimeout:
		return StepTimeout
	case o.Cause == CauseUnreachable:
		return StepUnreachable
	}
	return StepError
}

// DefaultRetryStatusCodes are retried when retry.on_status_codes is not
// given: rate limits and the transient server errors.
var DefaultRetryStatusCodes = []int{429, 500, 502, 503, 504}

// Retryable reports whether o may be retried under rc: a listed status
// (default DefaultRetryStatusCodes), or a connection failure the gateway
// synthesised (timeout, unreachable), whatever the list says. An answer
// whose class cannot succeed on retry (providers.ErrorClass.Retryable:
// quota_exhausted, context_length_exceeded, content_policy,
// invalid_request) is not retried even when its status is listed: an
// OpenAI insufficient_quota comes as a 429 and a context-length error as
// a 400. Nothing is retried once a byte reached the client.
func Retryable(rc *Retry, o Outcome) bool {
	if o.Committed || o.OK() || o.Skipped || o.Cached {
		return false
	}
	switch o.Cause {
	case CauseTimeout, CauseUnreachable:
		return true
	case CauseLocal, CauseClientGone, CauseStreamFailed:
		return false
	}
	if !o.ErrorType.Retryable() {
		return false
	}
	codes := rc.OnStatusCodes
	if len(codes) == 0 {
		codes = DefaultRetryStatusCodes
	}
	return slices.Contains(codes, o.Status)
}
