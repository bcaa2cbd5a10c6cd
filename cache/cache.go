// Package cache is the gateway's response cache: complete, successful
// answers kept in a bounded in-process ristretto cache, keyed by what
// determines the answer (see Key), and the conversions that let a streamed
// request be served from a stored answer and a streamed answer be stored.
package cache

import (
	"fmt"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/status"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Defaults and bounds.
const (
	// DefaultSize is the cache's capacity in bytes of stored bodies when
	// the handler configures none.
	DefaultSize = 256 << 20
	// DefaultMaxAge applies when cache.max_age is absent or 0.
	DefaultMaxAge = 24 * time.Hour
	// MaxMaxAge caps cache.max_age (90 days, as the reference's hosted
	// gateway does).
	MaxMaxAge = 90 * 24 * time.Hour
	// MaxEntrySize is the largest body stored; bigger answers are passed
	// to the client and not cached, so one answer cannot evict thousands.
	MaxEntrySize = 4 << 20
	// entryOverhead approximates the bytes an entry costs besides its body.
	entryOverhead = 128
)

// Status values of the x-gateway-cache-status response header (package
// status names them; these keep the cache's own spelling).
const (
	StatusHit          = status.Hit
	StatusMiss         = status.Miss
	StatusRefresh      = status.Refresh
	StatusDisabled     = status.Disabled
	StatusSemanticMiss = status.SemanticMiss
	// StatusSemanticHit is an answer the semantic cache found by
	// similarity rather than by exact key.
	StatusSemanticHit = status.SemanticHit
)

// IsHit reports whether an x-gateway-cache-status value means the answer
// came from the cache (exact or semantic), so no provider was called and
// no tokens were spent.
func IsHit(s string) bool { return status.IsHit(s) }

// Entry is one stored answer: always a complete OpenAI-format JSON body
// (a streamed answer is stored assembled).
type Entry struct {
	Status  int
	Body    []byte
	Expires time.Time
}

// Store is a bounded cache of answers, safe for concurrent use.
type Store struct {
	c   *ristretto.Cache[string, *Entry]
	now func() time.Time
}

// New returns a store holding about size bytes of answers; now is the
// clock expiry is checked against.
func New(size int64, now func() time.Time) (*Store, error) {
	if size <= 0 {
		size = DefaultSize
	}
	// Ristretto wants about ten counters per item it may hold; assume
	// answers of 1 KB on average, within sane bounds.
	counters := min(max(size/1024*10, 1e4), 1e7)
	c, err := ristretto.NewCache(&ristretto.Config[string, *Entry]{
		NumCounters:        counters,
		MaxCost:            size,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("response cache: %v", err)
	}
	return &Store{c: c, now: now}, nil
}

// Get returns the unexpired answer stored under key.
func (s *Store) Get(key string) (*Entry, bool) {
	e, ok := s.c.Get(key)
	if !ok {
		return nil, false
	}
	if !s.now().Before(e.Expires) {
		s.c.Del(key)
		return nil, false
	}
	return e, true
}

// Set stores an answer for ttl and waits until it is visible to Get, so
// the next identical request hits. It reports whether the answer was
// admitted (ristretto may refuse it in favour of more popular entries).
func (s *Store) Set(key string, status int, body []byte, ttl time.Duration) bool {
	if len(body) == 0 || len(body) > MaxEntrySize || ttl <= 0 {
		return false
	}
	e := &Entry{Status: status, Body: body, Expires: s.now().Add(ttl)}
	// ristretto's own TTL (on the wall clock) frees memory of expired
	// entries nobody asks for again; Get checks Expires on our clock.
	if !s.c.SetWithTTL(key, e, int64(len(body)+len(key)+entryOverhead), ttl) {
		return false
	}
	s.c.Wait()
	return true
}

// Close releases the cache. Late calls on a closed store miss and store
// nothing, so in-flight requests of an old config are safe.
func (s *Store) Close() { s.c.Close() }

// MaxAge returns the time to keep answers for a target's cache settings:
// max_age seconds, DefaultMaxAge when absent or 0, at most MaxMaxAge.
func MaxAge(c *routing.Cache) time.Duration {
	if c == nil || c.MaxAge == nil || *c.MaxAge <= 0 {
		return DefaultMaxAge
	}
	if *c.MaxAge >= int64(MaxMaxAge/time.Second) {
		return MaxMaxAge
	}
	return time.Duration(*c.MaxAge) * time.Second
}
