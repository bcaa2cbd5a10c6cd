package app

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// gatewayPool holds the data-plane state that must outlive a config
// reload and be shared by every llm_gateway route of the process: the
// circuit breakers and the response caches. Each route loads what it uses
// when it is provisioned and releases it when it is cleaned up; because
// Caddy provisions the new config before cleaning up the old one, the
// reference count never drops to zero across a reload and the state
// carries over.
var gatewayPool = caddy.NewUsagePool()

// breakersPoolKey names the one breaker registry of the process. Keys
// inside it already separate targets and settings, so one registry is
// enough however many routes there are.
const breakersPoolKey = "llm.breakers"

// cachePoolKey names a response cache by its capacity: routes configured
// with the same cache_size share one cache, and changing the size starts
// a new cache (the old one is closed when no config uses it).
func cachePoolKey(size int64) string { return "llm.cache." + strconv.FormatInt(size, 10) }

// loadsPoolKey names the one registry of target measurements (time to
// first byte, attempts in flight) the measured loadbalance modes read.
const loadsPoolKey = "llm.loads"

type pooledBreakers struct{ *routing.BreakerSet }

type pooledLoads struct{ *routing.LoadStats }

// Destruct has nothing to release: measurements are plain memory.
func (pooledLoads) Destruct() error { return nil }

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

// Breakers returns the process's circuit breakers and the function that
// releases this caller's use of them (call it from Cleanup).
func (a *App) Breakers(logger *zap.Logger) (*routing.BreakerSet, func(), error) {
	v, _, err := gatewayPool.LoadOrNew(breakersPoolKey, func() (caddy.Destructor, error) {
		return pooledBreakers{routing.NewBreakerSet(Now, logger)}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(pooledBreakers).BreakerSet, release(breakersPoolKey), nil
}

// Loads returns the process's target measurements, shared by every route
// so they survive reloads, and the function that releases this caller's
// use of them (call it from Cleanup).
func (a *App) Loads() (*routing.LoadStats, func(), error) {
	v, _, err := gatewayPool.LoadOrNew(loadsPoolKey, func() (caddy.Destructor, error) {
		return pooledLoads{routing.NewLoadStats(Now)}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(pooledLoads).LoadStats, release(loadsPoolKey), nil
}

// ResponseCache returns the response cache of the given capacity (size <=
// 0 means cache.DefaultSize), shared by every route that asks for that
// size, and the function that releases this caller's use of it.
func (a *App) ResponseCache(size int64) (*cache.Store, func(), error) {
	if size <= 0 {
		size = cache.DefaultSize
	}
	key := cachePoolKey(size)
	v, _, err := gatewayPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		s, err := cache.New(size, Now)
		if err != nil {
			return nil, err
		}
		return pooledCache{s}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(pooledCache).Store, release(key), nil
}

func release(key string) func() {
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			_, _ = gatewayPool.Delete(key)
		}
	}
}

// clock is what breakers, the cache and budget alerts' period ends read
// the time from. Only tests change it, through SetClock.
var clock atomic.Pointer[func() time.Time]

// Now is the clock of the shared breakers and caches, and the one budget
// alerts tell a period's end with (the reset event).
func Now() time.Time {
	if f := clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// SetClock replaces the clock the shared circuit breakers (cooldowns,
// idleness), response caches (expiry) and budget alerts (a period's end)
// read, and returns a function that restores the previous one. It exists
// for tests, which cannot wait out a 30-second cooldown, a day-long
// max_age or a month; production never calls it.
func SetClock(fn func() time.Time) (restore func()) {
	prev := clock.Swap(&fn)
	return func() { clock.Store(prev) }
}
