package app

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/semantic"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/shared"
)

// cacheSettings adds "semantic_cache" to the app and holds the shared
// response-cache backend. It is embedded in App so the JSON field appears
// at the app's top level.
type cacheSettings struct {
	// SemanticCache, when set, enables the semantic cache.
	SemanticCache *SemanticCacheConfig `json:"semantic_cache,omitempty"`

	sharedCache *shared.Redis
}

// SemanticCacheConfig configures the semantic cache: targets whose config
// has cache.mode "semantic" are answered, after an exact miss, with the
// stored answer of a similar enough earlier request of the same partition
// (workspace, cache namespace or metadata, provider target, model and
// every other request parameter). Without it, cache.mode "semantic" is
// served as exact match.
type SemanticCacheConfig struct {
	// Embedding is where requests are embedded: an embeddings request is
	// sent through the gateway to this virtual key.
	Embedding EmbeddingTarget `json:"embedding"`
	// Threshold is the cosine similarity a stored request must reach to
	// answer a new one, in (0, 1]; default semantic.DefaultThreshold
	// (0.95).
	Threshold float64 `json:"threshold,omitempty"`
	// MaxMemory bounds the in-process vector index, in bytes; the oldest
	// vectors are evicted beyond it. Default semantic.DefaultMaxBytes.
	MaxMemory int64 `json:"max_memory,omitempty"`
	// MaxEntries caps one partition; default semantic.DefaultMaxEntries.
	MaxEntries int `json:"max_entries,omitempty"`
	// EmbedTimeout bounds one embedding call; default
	// semantic.DefaultEmbedTimeout. A slower embedding is a cache miss.
	EmbedTimeout caddy.Duration `json:"embed_timeout,omitempty"`
}

// EmbeddingTarget names the embeddings model the semantic cache uses.
type EmbeddingTarget struct {
	// VirtualKey names one of the app's virtual keys.
	VirtualKey string `json:"virtual_key"`
	// Model is the embeddings model asked for.
	Model string `json:"model"`
}

// Bounds of SemanticCacheConfig.
const (
	// maxEmbedTimeout keeps a misconfigured timeout from holding every
	// semantic-mode request for minutes.
	maxEmbedTimeout = time.Minute
	// maxIndexEntries bounds one partition's exact scan.
	maxIndexEntries = 1_000_000
)

// provisionCaches checks the semantic cache's settings and, when Redis is
// configured, makes the shared response-cache backend, so every instance
// serves the answers any instance stored.
func (a *App) provisionCaches() error {
	if a.redis != nil {
		a.sharedCache = shared.NewRedis(a.redis, shared.RedisOptions{Logger: a.logger, Now: Now,
			Prefix: a.RedisKeyPrefix() + shared.DefaultPrefix})
	}
	sc := a.SemanticCache
	if sc == nil {
		return nil
	}
	switch {
	case sc.Embedding.VirtualKey == "":
		return fmt.Errorf("semantic_cache: embedding needs a virtual key")
	case a.VirtualKeys[sc.Embedding.VirtualKey] == nil:
		return fmt.Errorf("semantic_cache: embedding virtual key %q is not configured", sc.Embedding.VirtualKey)
	case sc.Embedding.Model == "":
		return fmt.Errorf("semantic_cache: embedding needs a model")
	case sc.Threshold < 0 || sc.Threshold > 1:
		return fmt.Errorf("semantic_cache: threshold must be in (0, 1], got %v", sc.Threshold)
	case sc.MaxMemory < 0:
		return fmt.Errorf("semantic_cache: max_memory must not be negative")
	case sc.MaxEntries < 0 || sc.MaxEntries > maxIndexEntries:
		return fmt.Errorf("semantic_cache: max_entries must be in [1, %d]", maxIndexEntries)
	case sc.EmbedTimeout < 0 || time.Duration(sc.EmbedTimeout) > maxEmbedTimeout:
		return fmt.Errorf("semantic_cache: embed_timeout must be at most %v", maxEmbedTimeout)
	}
	return nil
}

// CacheBackend returns where the response cache stores answers: Redis
// when the app configures redis (shared by every instance, with the
// answer's max_age as TTL), else local, the in-process store a route
// loaded with ResponseCache.
func (a *App) CacheBackend(local *cache.Store) shared.Backend {
	if a.sharedCache != nil {
		return a.sharedCache
	}
	return shared.Local{Store: local}
}

// SemanticSettings are the resolved settings of the semantic cache.
type SemanticSettings struct {
	// VirtualKey and Model name the embeddings target.
	VirtualKey, Model string
	// Threshold is the similarity a hit needs.
	Threshold float32
	// EmbedTimeout bounds one embedding call.
	EmbedTimeout time.Duration
}

// SemanticIndex returns the semantic cache's settings and its vector
// index, shared by every route and kept across reloads while the index's
// bounds stay the same, and the function that releases this caller's use
// of it. It returns a nil index (and a no-op release) when no semantic
// cache is configured.
func (a *App) SemanticIndex() (*SemanticSettings, *semantic.Index, func(), error) {
	sc := a.SemanticCache
	if sc == nil {
		return nil, nil, func() {}, nil
	}
	maxBytes, maxEntries := sc.MaxMemory, sc.MaxEntries
	if maxBytes <= 0 {
		maxBytes = semantic.DefaultMaxBytes
	}
	if maxEntries <= 0 {
		maxEntries = semantic.DefaultMaxEntries
	}
	key := "llm.semantic." + strconv.FormatInt(maxBytes, 10) + "." + strconv.Itoa(maxEntries)
	v, _, err := gatewayPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return pooledIndex{semantic.NewIndex(semantic.Config{MaxBytes: maxBytes, MaxEntries: maxEntries, Now: Now})}, nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	s := &SemanticSettings{
		VirtualKey:   sc.Embedding.VirtualKey,
		Model:        sc.Embedding.Model,
		Threshold:    float32(sc.Threshold),
		EmbedTimeout: time.Duration(sc.EmbedTimeout),
	}
	return s, v.(pooledIndex).Index, release(key), nil
}

type pooledIndex struct{ *semantic.Index }

// Destruct has nothing to release: the index is memory only.
func (pooledIndex) Destruct() error { return nil }
