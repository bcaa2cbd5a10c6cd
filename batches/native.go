package batches

import (
	"context"
	"net/http"
	"strconv"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Native batches. A batch whose route resolves to a provider with a batch
// job API of its own (providers.BatchJobs: Anthropic's Message Batches),
// and whose route runs batches natively (the default; llm_gateway's
// batch_mode managed keeps the managed run), is not run line by line: the
// gateway translates every line as it would translate the same on-demand
// request and submits them as one provider job, at the provider's batch
// price. The batch stays a managed batch in every other way: its record,
// files, lease, takeover, cancel and expiry are the engine's, and its
// results land in the same output and error files, in OpenAI's shape.
//
// The job's id is stored before anything else happens after the
// provider answered the create, and the record says a submission is
// under way before it is sent, so an instance that takes the batch over
// polls the job the first owner created and never submits it again. An
// owner that died between sending the create and storing the answer
// leaves a batch that cannot know whether its job exists: it fails with
// native_submit_interrupted rather than risk a second job.

// NativeRunner is a Runner whose route can hand a batch to its
// provider's batch job API. The handler's batch runner implements it.
type NativeRunner interface {
	Runner
	// NativeProvider returns the provider whose job API runs a batch
	// that caller creates with header for endpoint, "" when the batch
	// runs managed: the route's batch mode is managed, the request routes
	// to several targets or to a provider without a job API, or the
	// endpoint is not one the job API takes.
	NativeProvider(caller Caller, header http.Header, endpoint string) string
	// NativeJobs returns provider's job API for batch batchID as the
	// route of caller and header resolves now (credentials and egress
	// policy of the current config). ErrCallerRevoked when caller's key
	// is gone; another error when the route no longer reaches provider
	// with one target.
	NativeJobs(ctx context.Context, caller Caller, header http.Header, provider, batchID string) (NativeJobs, error)
}

// NativeJobs is one provider's batch job API for one batch's route.
// Errors that are *apierror.Error values are the provider's (or the
// gateway's) answers; others are failures to reach the provider.
type NativeJobs interface {
	// Submit translates each line lines yields (an OpenAI request body
	// under a provider-safe id) as the on-demand request would be
	// translated and creates one job of those that translate. A line
	// that does not is given to reject with its error (an
	// *apierror.Error, the answer an on-demand call would have got) and
	// is not submitted. jobID is "" when no line was submitted.
	Submit(ctx context.Context, lines providers.BatchLines, reject func(id string, err error)) (jobID string, err error)
	// Get returns the job's state.
	Get(ctx context.Context, jobID string) (providers.BatchJob, error)
	// Cancel asks the provider to stop the job.
	Cancel(ctx context.Context, jobID string) error
	// Results calls fn with each line of an ended job's results, each
	// answer translated back to OpenAI's format as an on-demand answer
	// would be, stopping at fn's first error.
	Results(ctx context.Context, jobID string, fn func(*NativeResult) error) error
}

// NativeResult is one translated line of a job's results.
type NativeResult struct {
	providers.BatchResult
	// Record, when set, writes the line's ledger record (flagged as a
	// batch line, at the batch price) and charges its usage limits. The
	// engine calls it once per line, with the line's charge and the model
	// its body asks for, when that charge is this run's (Charge.Claim).
	Record func(ctx context.Context, c *Charge, model string)
}

// nativeState is what a native batch records of its provider job. A
// record holds it by pointer; it is replaced, never changed, so record
// snapshots taken by the lease watcher never race with the driver.
type nativeState struct {
	Provider string `json:"provider"`
	// JobID is the provider job's id, stored as soon as it is known.
	JobID string `json:"job_id,omitempty"`
	// Submitting is stored before the job is created: found set without
	// a JobID, the submission's outcome is unknown.
	Submitting bool `json:"submitting,omitempty"`
	// CancelSent is set once the provider was asked to stop the job (a
	// cancel, an early end or the batch's expiry).
	CancelSent bool `json:"cancel_sent,omitempty"`
	// Expired is set when the batch's window ended before its job.
	Expired bool `json:"expired,omitempty"`
	// Rejected counts the lines refused before submission.
	Rejected int `json:"rejected,omitempty"`
}

// nativeID is the provider-side id of the n-th request of the input
// (0-based): OpenAI's custom_ids may be any string, providers' may not
// (Anthropic takes [a-zA-Z0-9_-]{1,64}), so lines are numbered, and the
// results mapped back to custom_ids by reading the input again.
func nativeID(n int) string {
	return "gw-" + strconv.Itoa(n)
}

// nativeIndex reads a nativeID back; -1 when id is not one.
func nativeIndex(id string) int {
	if len(id) < 4 || id[:3] != "gw-" || len(id) > 12 {
		return -1
	}
	n := 0
	for _, c := range id[3:] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// nativeProvider returns the provider a batch created now runs natively
// on, "" for a managed run: the immediate window is the gateway's own and
// always managed.
func (e *Engine) nativeProvider(caller Caller, header http.Header, endpoint, window string) string {
	if window != "24h" {
		return ""
	}
	nr, ok := e.runnerFor(caller.Route).(NativeRunner)
	if !ok {
		return ""
	}
	return nr.NativeProvider(caller, header, endpoint)
}

// native returns j's provider job state (nil for a managed batch).
func (e *Engine) native(j *job) *nativeState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return j.rec.Native
}

// setNative replaces j's provider job state with change applied to a
// copy of it.
func (e *Engine) setNative(j *job, change func(*nativeState)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := *j.rec.Native
	change(&n)
	j.rec.Native = &n
}
