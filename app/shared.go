package app

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
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
	if a.redisKey != "" {
		_, err := redisPool.Delete(a.redisKey)
		a.redisKey = ""
		return err
	}
	return nil
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
