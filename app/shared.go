package app

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// RedisConfig connects every gateway instance to one Redis, so rate-limit
// counters and policies are shared across a cluster.
type RedisConfig struct {
	// Address is host:port.
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	// Password may be an {env.*} placeholder.
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
	// FailOpen admits requests when Redis cannot be reached. The default,
	// fail closed, rejects them with a 503 so limits are never silently off.
	FailOpen bool `json:"fail_open,omitempty"`
}

// redisPool holds one client per Redis target for the whole process, so a
// config reload reuses its connections instead of dropping them.
var redisPool = caddy.NewUsagePool()

type redisClient struct{ redis.UniversalClient }

func (c redisClient) Destruct() error { return c.Close() }

func (a *App) provisionShared(ctx caddy.Context) error {
	a.storage = ctx.Storage()
	if err := a.provisionRedis(); err != nil {
		return err
	}
	return a.provisionPolicies(ctx)
}

func (a *App) provisionRedis() error {
	if a.Redis == nil {
		return nil
	}
	if a.Redis.Address == "" {
		return fmt.Errorf("redis: address is required")
	}
	repl := caddy.NewReplacer()
	opts := &redis.Options{
		Addr:     repl.ReplaceAll(a.Redis.Address, ""),
		Username: repl.ReplaceAll(a.Redis.Username, ""),
		Password: repl.ReplaceAll(a.Redis.Password, ""),
		DB:       a.Redis.DB,
		// Fail fast when Redis is down: the rate limiter then applies its
		// fail-open or fail-closed choice instead of stalling requests on
		// go-redis's default redials.
		DialTimeout: time.Second,
		MaxRetries:  1,
	}
	// The key names no password: it identifies the target, not the secret.
	key := opts.Addr + "|" + opts.Username + "|" + strconv.Itoa(opts.DB)
	v, _, err := redisPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return redisClient{redis.NewClient(opts)}, nil
	})
	if err != nil {
		return err
	}
	a.redisKey = key
	a.redis = v.(redisClient).UniversalClient
	return nil
}

// Cleanup releases the shared Redis client when no config uses it.
func (a *App) Cleanup() error {
	a.cleanupBatches()
	a.cleanupLedger()
	var err error
	if a.redisKey != "" {
		_, err = redisPool.Delete(a.redisKey)
		a.redisKey = ""
	}
	if a.limiterKey != "" {
		_, _ = memoryLimiters.Delete(a.limiterKey)
		a.limiterKey = ""
	}
	return err
}

// RedisClient returns the shared Redis client, or nil when no redis is
// configured.
func (a *App) RedisClient() redis.UniversalClient { return a.redis }

// RedisFailOpen reports whether requests are admitted while Redis is down.
func (a *App) RedisFailOpen() bool { return a.Redis != nil && a.Redis.FailOpen }

// Storage returns Caddy's configured storage, where control-plane records
// live when no Redis is configured.
func (a *App) Storage() certmagic.Storage { return a.storage }

var _ caddy.CleanerUpper = (*App)(nil)

// memoryLimiters holds the in-process rate-limit counters for the whole
// process, so a config reload keeps every window's state.
var memoryLimiters = caddy.NewUsagePool()

type memoryLimiter struct{ *policies.MemoryLimiter }

func (memoryLimiter) Destruct() error { return nil }

const memoryLimiterKey = "memory"

func (a *App) provisionPolicies(ctx caddy.Context) error {
	if a.redis != nil {
		store := policies.NewRedisStore(a.redis, policies.StoreConfig{})
		// Other instances' policy writes drop this config's cached set as
		// soon as their notice arrives; the watch ends with the config.
		go store.Watch(ctx, nil)
		a.policyStore = store
		a.limiter = policies.NewRedisLimiter(a.redis)
		return nil
	}
	a.policyStore = policies.NewStorageStore(a.storage, policies.StoreConfig{})
	v, _, err := memoryLimiters.LoadOrNew(memoryLimiterKey, func() (caddy.Destructor, error) {
		return memoryLimiter{policies.NewMemoryLimiter()}, nil
	})
	if err != nil {
		return err
	}
	a.limiterKey = memoryLimiterKey
	a.limiter = v.(memoryLimiter).MemoryLimiter
	return nil
}

// Policies returns the rate-limit policy store: Redis when configured (so
// every instance sees every policy), else Caddy's storage.
func (a *App) Policies() policies.CachedStore { return a.policyStore }

// Limiter returns the rate-limit counters: Redis when configured, else
// in-process counters that survive config reloads.
func (a *App) Limiter() policies.Limiter { return a.limiter }
