package handlers

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// sharedPool holds the state that must outlive a config reload and be
// shared by every llm_gateway route of the process: the circuit breakers
// and the response cache. Each Gateway loads what it uses in Provision
// and releases it in Cleanup; because Caddy provisions the new config
// before cleaning up the old one, the reference count never drops to zero
// across a reload and the state carries over.
var sharedPool = caddy.NewUsagePool()

// breakersPoolKey names the one breaker registry of the process. Keys
// inside it already separate targets and settings, so one registry is
// enough however many routes there are.
const breakersPoolKey = "llm_gateway.breakers"

// cachePoolKey names a response cache by its capacity: routes configured
// with the same cache_size share one cache, and changing the size starts
// a new cache (the old one is closed when no config uses it).
func cachePoolKey(size int64) string { return "llm_gateway.cache." + strconv.FormatInt(size, 10) }

type pooledBreakers struct{ *routing.BreakerSet }

// Destruct has nothing to release: breakers hold no goroutines or files,
// and requests still running on an old config may keep using them.
func (pooledBreakers) Destruct() error { return nil }

type pooledCache struct{ *cache.Store }

// Destruct closes the cache; late lookups by in-flight requests of an old
// config then miss, which is harmless.
func (p pooledCache) Destruct() error {
	p.Close()
	return nil
}

// clock is what breakers and the cache read the time from. Only tests
// change it, through SetClock.
var clock atomic.Pointer[func() time.Time]

func now() time.Time {
	if f := clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// SetClock replaces the clock the shared circuit breakers (cooldowns,
// idleness) and the response cache (expiry) read, and returns a function
// that restores the previous one. It exists for tests, which cannot wait
// out a 30-second cooldown or a day-long max_age; production never calls
// it.
func SetClock(fn func() time.Time) (restore func()) {
	prev := clock.Swap(&fn)
	return func() { clock.Store(prev) }
}

// provisionShared loads the breakers and the cache from the pool,
// remembering the keys so Cleanup releases exactly what was loaded, even
// after a partial Provision.
func (g *Gateway) provisionShared() error {
	v, _, err := sharedPool.LoadOrNew(breakersPoolKey, func() (caddy.Destructor, error) {
		return pooledBreakers{routing.NewBreakerSet(now, g.logger)}, nil
	})
	if err != nil {
		return err
	}
	g.pooled = append(g.pooled, breakersPoolKey)
	g.breakers = v.(pooledBreakers).BreakerSet

	size := g.CacheSize
	if size <= 0 {
		size = cache.DefaultSize
	}
	key := cachePoolKey(size)
	v, _, err = sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		s, err := cache.New(size, now)
		if err != nil {
			return nil, err
		}
		return pooledCache{s}, nil
	})
	if err != nil {
		return err
	}
	g.pooled = append(g.pooled, key)
	g.cache = v.(pooledCache).Store
	return nil
}

// Cleanup releases the shared state this handler loaded.
func (g *Gateway) Cleanup() error {
	for _, k := range g.pooled {
		_, _ = sharedPool.Delete(k)
	}
	g.pooled = nil
	return nil
}

var _ caddy.CleanerUpper = (*Gateway)(nil)
