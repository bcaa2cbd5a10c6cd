package files

import (
	"errors"
	"net/http"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

// StoreError is a fault of the KV the files live in (Redis unreachable,
// a storage write refused): the request was fine and the same call may
// succeed later. The store's methods return it as an error that is not an
// apierror, so a caller that retries storage faults (the batch engine)
// retries it; an HTTP answer makes it a 503 (AsAPIError).
type StoreError struct {
	// Op names what failed ("storing content").
	Op string
	// Err is the KV's error. It is for logs, never for a client: it can
	// name hosts and keys.
	Err error
}

// Error implements error.
func (e *StoreError) Error() string { return "files: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the KV's error.
func (e *StoreError) Unwrap() error { return e.Err }

// Unavailable is the 503 of a file call the store could not serve: it
// names the store, not the fault, and a client retries it.
func Unavailable() *apierror.Error {
	return apierror.New(http.StatusServiceUnavailable, apierror.TypeUnavailable,
		"the gateway's file store is unavailable; retry later").WithCode("file_store_unavailable")
}

// AsAPIError is the answer to a client for an error of the store's
// methods: a *StoreError is Unavailable, an apierror is itself, anything
// else a 500.
func AsAPIError(err error) *apierror.Error {
	if se := new(StoreError); errors.As(err, &se) {
		return Unavailable()
	}
	return apierror.As(err)
}
