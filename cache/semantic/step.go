package semantic

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/shared"
)

// StatusSemanticHit is x-gateway-cache-status for an answer found by
// similarity.
const StatusSemanticHit = cache.StatusSemanticHit

// DefaultEmbedTimeout bounds one embedding call when Cache.EmbedTimeout
// is 0.
const DefaultEmbedTimeout = 5 * time.Second

// Cache is the cache step: exact lookup, then (for semantic mode) embed
// and similarity lookup, and the matching stores. It never fails a
// request: storage and embedding errors are misses. Safe for concurrent
// use once configured.
type Cache struct {
	// Store holds the answers (shared.Local or shared.Redis).
	Store shared.Backend
	// Index, Embedder: the semantic cache; with either nil, semantic mode
	// is served as exact match.
	Index    *Index
	Embedder Embedder
	// Threshold is the similarity a hit needs (DefaultThreshold when 0).
	Threshold float32
	// EmbedTimeout bounds each embedding call (DefaultEmbedTimeout when 0).
	EmbedTimeout time.Duration
	// Logger receives embedding failures, at most one a minute.
	Logger *zap.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
}

// Request is what the cache step knows about a request.
type Request struct {
	// Key is the exact cache key (cache.Key).
	Key string
	// Semantic is true for cache mode "semantic".
	Semantic bool
	// ForceRefresh skips the lookups (x-gateway-cache-force-refresh).
	ForceRefresh bool
	// Parts and Body give the partition and the embedded text.
	Parts PartitionParts
	Body  []byte
}

// Result is a lookup's outcome; pass it back to Cache.Save.
type Result struct {
	// Entry is the answer on a hit, else nil.
	Entry *cache.Entry
	// Status is the x-gateway-cache-status value: HIT, SEMANTIC HIT,
	// MISS, SEMANTIC MISS or REFRESH.
	Status string
	// Similarity is the match's cosine similarity on a semantic hit.
	Similarity float32

	partition Partition
	vector    []float32
	tried     bool // Lookup asked for the vector (and may have failed)
}

// Lookup finds an answer for r: by exact key first; in semantic mode, on
// a miss, by embedding the request and searching its partition. A
// semantic hit whose answer is gone drops the stale vector and misses; a
// live one is also stored under r.Key for the rest of its life, so the
// same paraphrase next time is an exact hit without an embedding call.
func (c *Cache) Lookup(ctx context.Context, r Request) Result {
	res := Result{Status: cache.StatusMiss}
	semantic := r.Semantic && c.Index != nil && c.Embedder != nil
	if semantic {
		res.Status = cache.StatusSemanticMiss
	}
	if r.ForceRefresh {
		res.Status = cache.StatusRefresh
		return res
	}
	if e, ok := c.Store.Get(ctx, r.Key); ok {
		res.Entry, res.Status = e, cache.StatusHit
		return res
	}
	if !semantic || !c.prepare(ctx, r, &res) {
		return res
	}
	key, sim, ok := c.Index.Lookup(res.partition, res.vector, c.Threshold)
	if !ok {
		return res
	}
	e, ok := c.Store.Get(ctx, key)
	if !ok {
		c.Index.Remove(res.partition, key)
		return res
	}
	if ttl := e.Expires.Sub(c.now()); ttl > 0 {
		c.Store.Set(ctx, r.Key, e.Status, e.Body, ttl)
	}
	res.Entry, res.Status, res.Similarity = e, StatusSemanticHit, sim
	return res
}

// Save stores a fresh, complete, successful answer under r.Key for
// maxAge and, in semantic mode, indexes the request's vector (embedding
// it now when Lookup did not try, as after a forced refresh; an embedding
// that failed in Lookup is not retried). It reports whether the answer
// was stored.
func (c *Cache) Save(ctx context.Context, r Request, res Result, status int, body []byte, maxAge time.Duration) bool {
	if !c.Store.Set(ctx, r.Key, status, body, maxAge) {
		return false
	}
	if !r.Semantic || c.Index == nil || c.Embedder == nil {
		return true
	}
	if res.vector == nil && (res.tried || !c.prepare(ctx, r, &res)) {
		return true
	}
	_ = c.Index.Add(res.partition, res.vector, r.Key, c.now().Add(maxAge))
	return true
}

// prepare fills res's partition and vector, reporting false when the
// request is not eligible or the embedding failed.
func (c *Cache) prepare(ctx context.Context, r Request, res *Result) bool {
	res.tried = true
	part, text, err := Prepare(r.Parts, r.Body)
	if err != nil {
		return false
	}
	timeout := c.EmbedTimeout
	if timeout <= 0 {
		timeout = DefaultEmbedTimeout
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	vec, err := c.Embedder.Embed(ectx, text)
	cancel()
	if err == nil {
		_, ok := normalized(vec)
		if !ok {
			err = ErrBadVector
		}
	}
	if err != nil {
		c.logEmbedError(err)
		return false
	}
	res.partition, res.vector = part, vec
	return true
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// logEmbedError logs an embedding failure, at most once a minute, with
// the number of failures not logged since.
func (c *Cache) logEmbedError(err error) {
	if c.Logger == nil {
		return
	}
	now := c.now()
	c.logMu.Lock()
	logIt := c.lastLog.IsZero() || now.Sub(c.lastLog) >= time.Minute
	n := c.suppressed
	if logIt {
		c.lastLog, c.suppressed = now, 0
	} else {
		c.suppressed++
	}
	c.logMu.Unlock()
	if logIt {
		c.Logger.Warn("semantic cache: embedding failed, serving as a cache miss",
			zap.Error(err), zap.Int("failures_not_logged", n))
	}
}
