// Package batches is the gateway's managed batch engine: it runs a JSONL
// file of requests (OpenAI's batch input format) through the gateway's
// own pipeline, for providers without a batch API and for the
// specification's completion_window "immediate". Jobs are persisted in
// the same storage as the files (Caddy storage or Redis), scoped to the
// caller's workspace, survive config reloads (the engine lives in the llm
// app's usage pool) and resume after a restart.
package batches

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
)

// Statuses of a batch (OpenAI's Batch.status).
const (
	StatusValidating = "validating"
	StatusFailed     = "failed"
	StatusInProgress = "in_progress"
	StatusFinalizing = "finalizing"
	StatusCompleted  = "completed"
	StatusExpired    = "expired"
	StatusCancelling = "cancelling"
	StatusCancelled  = "cancelled"
)

// Terminal reports whether no further transition follows status.
func Terminal(status string) bool {
	switch status {
	case StatusFailed, StatusCompleted, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// Caller is who created a batch; every line runs as this identity, so
// usage, rate limits and logs are attributed to it.
type Caller struct {
	Name           string `json:"name"`
	WorkspaceID    string `json:"workspace_id"`
	OrganisationID string `json:"organisation_id"`
	// KeyID is the record id of the API key that created the batch
	// (empty for a Caddyfile key): its lines run as that key while it is
	// usable, with its allow-list and defaults.
	KeyID string `json:"key_id,omitempty"`
	// Admission is the key of the rate-limit stage the batch's creation
	// passed (app.Admission), empty when its route had none; every line
	// passes the same stage. Records written before it existed have none.
	Admission string `json:"admission,omitempty"`
	// Route is the key of the llm_gateway route that created the batch
	// (see Engine.RegisterRunner): every line runs through that route's
	// pipeline and egress policy, never another route's. Records written
	// before it existed have none and cannot run.
	Route string `json:"route,omitempty"`
}

// Runner sends one request through the gateway's pipeline without an HTTP
// client (routing, retries, fallback, cache, rate limits, guardrails and
// logs all apply) and returns the final response. err is for failures
// without a response; an *apierror.Error is written to the error file
// with its status and envelope, any other error as a server error whose
// text is not shown. Run must honour ctx and be safe for concurrent use.
type Runner interface {
	Run(ctx context.Context, identity Caller, method, path string, header http.Header, body []byte) (status int, respBody []byte, err error)
}

// RequestCounts is Batch.request_counts.
type RequestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Errors is Batch.errors.
type Errors struct {
	Object string      `json:"object"`
	Data   []LineError `json:"data"`
}

// LineError is one validation failure; Line is 1-based.
type LineError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// Batch is OpenAI's batch object.
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	Errors           *Errors           `json:"errors"`

	// seq orders batches created in the same second (record.Created);
	// it is not on the wire, where created_at stays in seconds.
	seq int64
}

// record is what is stored: the batch and what running it needs.
type record struct {
	Batch    Batch  `json:"batch"`
	Caller   Caller `json:"caller"`
	Instance string `json:"instance"`
	// Header holds the creation request's routing headers that carry no
	// secret (see SplitHeader); Resumable is false when others (provider
	// keys, inline configs) were held in memory only, so the batch cannot
	// be resumed after a restart.
	Header    http.Header `json:"header,omitempty"`
	Resumable bool        `json:"resumable"`
	// Created is the creation time in nanoseconds, made strictly
	// increasing per engine, so lists keep creation order within a
	// second (Batch.created_at has whole seconds only).
	Created int64 `json:"created_ns,omitempty"`
	// Native, set for a batch run by its provider's job API, is that
	// job's state (native.go); nil for a managed run.
	Native *nativeState `json:"native,omitempty"`
}

// IDPrefix starts every managed batch id; the "gw" lets the handler send
// /v1/batches/{id} to the engine or to the provider by the id alone.
const IDPrefix = "batch_gw"

// IsManagedID reports whether id names a managed batch.
func IsManagedID(id string) bool {
	rest, ok := strings.CutPrefix(id, IDPrefix)
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }

// clone returns a deep copy of b, so a snapshot handed out never races
// with the running job.
func (b *Batch) clone() *Batch {
	c := *b
	if b.Metadata != nil {
		c.Metadata = make(map[string]string, len(b.Metadata))
		for k, v := range b.Metadata {
			c.Metadata[k] = v
		}
	}
	if b.Errors != nil {
		e := *b.Errors
		e.Data = append([]LineError(nil), b.Errors.Data...)
		c.Errors = &e
	}
	return &c
}

// JSON returns the batch object's JSON.
func (b *Batch) JSON() []byte {
	out, _ := json.Marshal(b)
	return out
}
