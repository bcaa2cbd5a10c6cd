// Package shared gives the gateway's cache step one interface over where
// answers are stored: the in-process cache (one instance) or Redis (every
// instance of a cluster serves what any instance stored).
package shared

import (
	"context"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
)

// Backend stores complete answers under exact cache keys (cache.Key). A
// Backend never fails a request: any storage error is a miss on Get and
// "not stored" on Set.
type Backend interface {
	// Get returns the unexpired answer stored under key.
	Get(ctx context.Context, key string) (*cache.Entry, bool)
	// Set stores an answer for maxAge and reports whether it was stored;
	// bodies that are empty or larger than cache.MaxEntrySize are not.
	Set(ctx context.Context, key string, status int, body []byte, maxAge time.Duration) bool
}

// Local is the Backend of the in-process cache.
type Local struct{ Store *cache.Store }

// Get returns the answer the in-process store holds under key.
func (l Local) Get(_ context.Context, key string) (*cache.Entry, bool) { return l.Store.Get(key) }

// Set stores the answer in the in-process store.
func (l Local) Set(_ context.Context, key string, status int, body []byte, maxAge time.Duration) bool {
	return l.Store.Set(key, status, body, maxAge)
}

var (
	_ Backend = Local{}
	_ Backend = (*Redis)(nil)
)
