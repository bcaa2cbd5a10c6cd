package app

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// RedisConfig connects every gateway instance to one Redis, so rate-limit
// counters, policies and the control-plane records are shared across a
// cluster. One of Address (a single node), Cluster (Redis Cluster seed
// nodes) or MasterName with Sentinels (Redis Sentinel) names the target.
type RedisConfig struct {
	// Address is host:port of a single node.
	Address string `json:"address,omitempty"`
	// Cluster lists seed nodes (host:port) of a Redis Cluster.
	Cluster []string `json:"cluster,omitempty"`
	// MasterName and Sentinels select a Sentinel-managed primary.
	MasterName string   `json:"master_name,omitempty"`
	Sentinels  []string `json:"sentinels,omitempty"`
	// SentinelUsername and SentinelPassword authenticate to the
	// sentinels when they differ from the data nodes' (Password may be
	// an {env.*} placeholder).
	SentinelUsername string `json:"sentinel_username,omitempty"`
	SentinelPassword string `json:"sentinel_password,omitempty"`
	Username         string `json:"username,omitempty"`
	// Password may be an {env.*} placeholder.
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
	// TLS, when set, connects over TLS.
	TLS *RedisTLS `json:"tls,omitempty"`
	// KeyPrefix starts every key the gateway writes (and every channel it
	// publishes on), so several gateway fleets can share one Redis.
	KeyPrefix string `json:"key_prefix,omitempty"`
	// FailOpen admits requests when Redis cannot be reached. The default,
	// fail closed, rejects them with a 503 so limits are never silently off.
	FailOpen bool `json:"fail_open,omitempty"`
}

// RedisTLS configures TLS to Redis. Without CA the system roots verify the
// server; Cert and Key (PEM files) present a client certificate.
type RedisTLS struct {
	CA         string `json:"ca,omitempty"`
	Cert       string `json:"cert,omitempty"`
	Key        string `json:"key,omitempty"`
	ServerName string `json:"server_name,omitempty"`
}

// redisPool holds one client per Redis target for the whole process, so a
// config reload reuses its connections instead of dropping them.
var redisPool = caddy.NewUsagePool()

type redisClient struct{ redis.UniversalClient }

func (c redisClient) Destruct() error { return c.Close() }

func (a *App) provisionShared(ctx caddy.Context) error {
	a.storage = ctx.Storage()
	if err := registerRedisMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	if err := a.provisionRedis(); err != nil {
		return err
	}
	if err := a.provisionRecords(); err != nil {
		return err
	}
	return a.provisionPolicies(ctx)
}

// redisOptions validates c and turns it into go-redis options, with
// placeholders replaced and certificates loaded.
func (c *RedisConfig) redisOptions() (*redis.UniversalOptions, error) {
	repl := caddy.NewReplacer()
	r := func(s string) string { return repl.ReplaceAll(s, "") }
	opts := &redis.UniversalOptions{
		Username: r(c.Username),
		Password: r(c.Password),
		DB:       c.DB,
		// Fail fast when Redis is down: the rate limiter then applies its
		// fail-open or fail-closed choice instead of stalling requests on
		// go-redis's default redials.
		DialTimeout: time.Second,
		MaxRetries:  1,
	}
	targets := 0
	if c.Address != "" {
		targets++
		opts.Addrs = []string{r(c.Address)}
	}
	if len(c.Cluster) > 0 {
		targets++
		for _, addr := range c.Cluster {
			opts.Addrs = append(opts.Addrs, r(addr))
		}
		opts.IsClusterMode = true
		if c.DB != 0 {
			return nil, fmt.Errorf("redis: db must be 0 with a Redis Cluster")
		}
	}
	if c.MasterName != "" || len(c.Sentinels) > 0 {
		targets++
		if c.MasterName == "" || len(c.Sentinels) == 0 {
			return nil, fmt.Errorf("redis: sentinel needs a master name and at least one sentinel address")
		}
		opts.MasterName = r(c.MasterName)
		for _, addr := range c.Sentinels {
			opts.Addrs = append(opts.Addrs, r(addr))
		}
		opts.SentinelUsername, opts.SentinelPassword = r(c.SentinelUsername), r(c.SentinelPassword)
	}
	switch {
	case targets == 0:
		return nil, fmt.Errorf("redis: an address, cluster nodes or a sentinel master is required")
	case targets > 1:
		return nil, fmt.Errorf("redis: give one of an address, cluster nodes or a sentinel master")
	}
	if c.TLS != nil {
		tc, err := c.TLS.config(r)
		if err != nil {
			return nil, err
		}
		opts.TLSConfig = tc
	}
	return opts, nil
}

// config builds the TLS client configuration.
func (t *RedisTLS) config(r func(string) string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r(t.ServerName)}
	if t.CA != "" {
		pem, err := os.ReadFile(r(t.CA))
		if err != nil {
			return nil, fmt.Errorf("redis tls: reading ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis tls: ca %s holds no PEM certificate", r(t.CA))
		}
		tc.RootCAs = pool
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, fmt.Errorf("redis tls: cert and key go together")
	}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(r(t.Cert), r(t.Key))
		if err != nil {
			return nil, fmt.Errorf("redis tls: loading the client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func (a *App) provisionRedis() error {
	if a.Redis == nil {
		return nil
	}
	opts, err := a.Redis.redisOptions()
	if err != nil {
		return err
	}
	// The pool key identifies the target and its credentials by digest:
	// a changed password or certificate gets a new client, and the key,
	// which may show in errors, holds no secret.
	sum := sha256.New()
	enc, _ := json.Marshal([]any{opts.Addrs, opts.MasterName, opts.Username, opts.Password, opts.SentinelUsername,
		opts.SentinelPassword, opts.DB, opts.IsClusterMode, a.Redis.TLS})
	sum.Write(enc)
	key := strings.Join(opts.Addrs, ",") + "|" + opts.Username + "|" + strconv.Itoa(opts.DB) + "|" + hex.EncodeToString(sum.Sum(nil))[:16]
	v, _, err := redisPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		c := redis.NewUniversalClient(opts)
		c.AddHook(redisMetricsHook{})
		return redisClient{c}, nil
	})
	if err != nil {
		return err
	}
	a.redisKey = key
	a.redis = v.(redisClient).UniversalClient
	a.probe = new(storeProbe)
	return nil
}

// RedisKeyPrefix is the configured key_prefix ("" without one): every key
// and channel the gateway uses in Redis starts with it.
func (a *App) RedisKeyPrefix() string {
	if a.Redis == nil {
		return ""
	}
	return a.Redis.KeyPrefix
}

// Cleanup releases the shared Redis client when no config uses it.
func (a *App) Cleanup() error {
	a.cleanupBatches()
	a.cleanupLedger()
	a.cleanupRecords()
	a.cleanupBudgetMetrics()
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
	switch {
	case a.recordsRedis:
		store := policies.NewRedisStore(a.redis, policies.StoreConfig{Namespace: a.RedisKeyPrefix() + "llmgw:policies"})
		// Other instances' policy writes drop this config's cached set as
		// soon as their notice arrives; the watch ends with the config.
		go store.Watch(ctx, nil)
		a.policyStore = store
	case a.recordsSQL != nil:
		// Read again every second: another instance's change applies
		// within it, as through Redis's notice.
		a.policyStore = policies.NewStorageStore(a.records, policies.StoreConfig{CacheTTL: recordsPollTTL})
	default:
		a.policyStore = policies.NewStorageStore(a.storage, policies.StoreConfig{})
	}
	if a.redis != nil {
		a.limiter = policies.NewRedisLimiter(a.redis, policies.WithKeyPrefix(a.RedisKeyPrefix()+policies.DefaultKeyPrefix))
		return nil
	}
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
