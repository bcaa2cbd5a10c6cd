package providers

import (
	"context"
	"io"
	"net/http"
)

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
	// WindowEnded is set when the provider's own window ended the job
	// before every line ran (a job API that lists no expired lines).
	WindowEnded bool
	// Failure, when the job ended without running its lines, is the
	// provider's reason.
	Failure string
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

// BatchDriver is implemented by providers whose batch job API is not a
// few calls at their on-demand base URL (BatchJobs) but takes its lines
// from, and leaves its results in, object storage the operator names
// (Bedrock batch inference: S3). The gateway still translates each line
// with Prepare, as the on-demand request; the driver stores the lines,
// creates, reads and stops the job, and reads its results back. Every
// call goes through env.HTTP: the route's transports and egress policy.
type BatchDriver interface {
	// BatchReady reports whether s says all the job API needs (a bucket,
	// a role); a route whose target is not ready runs batches managed.
	BatchReady(s *Settings) bool
	// BatchOneModel reports whether a job runs one model only: then the
	// gateway submits the lines of the first line's model and refuses the
	// others, and env.Model names that model.
	BatchOneModel() bool
	// SubmitBatch stores the lines and creates one job of them, returning
	// its id. A second call for the same env.Name must not create a
	// second job where the provider can tell (an idempotency token).
	SubmitBatch(ctx context.Context, env *BatchEnv, lines BatchLines) (jobID string, err error)
	// GetBatch returns the job's state.
	GetBatch(ctx context.Context, env *BatchEnv, jobID string) (BatchJob, error)
	// CancelBatch asks the provider to stop the job.
	CancelBatch(ctx context.Context, env *BatchEnv, jobID string) error
	// BatchResults returns an ended job's results as JSON lines that
	// ParseBatchResult reads.
	BatchResults(ctx context.Context, env *BatchEnv, jobID string) (io.ReadCloser, error)
	// ParseBatchResult reads one line of the job's results.
	ParseBatchResult(line []byte) (BatchResult, error)
}

// BatchEnv is what a BatchDriver's calls for one batch know.
type BatchEnv struct {
	// Settings are the batch's target's (credentials, region, storage).
	Settings *Settings
	// Name is unique to the gateway batch (its id): the job's name,
	// idempotency token and storage folder derive from it.
	Name string
	// Model is the model every line is sent with (BatchOneModel).
	Model string
	// HTTP sends every call: the route's transports and, for a target
	// whose addresses come from client input, its egress policy.
	HTTP *http.Client
	// Egress is that policy (nil when none applies), for the calls a
	// provider's Prepare makes itself (a service account's token).
	Egress Dialer
	// Error turns a call's non-2xx answer into the error the engine
	// reads (an *apierror.Error with the provider's status and message).
	Error func(status int, body []byte) error
}
