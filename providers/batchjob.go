package providers

import "io"

// BatchJobs is implemented by providers with a batch job API of their own
// that takes the same request bodies as their on-demand API (Anthropic's
// Message Batches): the gateway translates each line of an OpenAI batch
// with Prepare, as it would an on-demand chat completion, and submits them
// as one job. The job's calls are built with Prepare too (op OpProxy with
// the paths returned here), so they carry the target's authentication
// and reach its base URL or custom host under the same egress policy.
type BatchJobs interface {
	// BatchPaths are the paths, after the provider's base URL, of the
	// job API's calls; jobID is "" for the create path.
	BatchPaths(jobID string) BatchPaths
	// WriteBatchCreate writes the body creating a job of the lines lines
	// yields (each with the provider-safe id and the body Prepare built
	// for it), stopping at the first error.
	WriteBatchCreate(w io.Writer, lines BatchLines) error
	// ParseBatchJob reads a job object (the answer of create, get and
	// cancel).
	ParseBatchJob(body []byte) (BatchJob, error)
	// ParseBatchResult reads one line of the job's results.
	ParseBatchResult(line []byte) (BatchResult, error)
}

// BatchPaths are the paths of one job's calls.
type BatchPaths struct {
	Create, Get, Cancel, Results string
}

// BatchLines calls fn with each line of a job in order, stopping at and
// returning fn's first error.
type BatchLines func(fn func(id string, body []byte) error) error

// BatchJob is a provider job's state.
type BatchJob struct {
	ID string
	// Ended is set once the job processes no more lines and its results
	// can be read.
	Ended bool
	// Counts of lines by state.
	Processing, Succeeded, Errored, Canceled, Expired int
}

// Result kinds of a batch line (BatchResult.Kind).
const (
	BatchSucceeded = "succeeded"
	BatchErrored   = "errored"
	BatchCanceled  = "canceled"
	BatchExpired   = "expired"
)

// BatchResult is one line of a job's results.
type BatchResult struct {
	// ID is the line's id as submitted.
	ID string
	// Kind is one of the Batch* result kinds.
	Kind string
	// Status is the HTTP status the line's on-demand call would have
	// had: 200 for a success, the error's status for an errored line.
	Status int
	// Body is the provider's answer to the line in its on-demand format
	// (a message, or an error body), for its Translator.
	Body []byte
}
