package shared

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
)

// Defaults of RedisOptions.
const (
	DefaultPrefix      = "llm:cache:"
	DefaultTimeout     = 250 * time.Millisecond
	DefaultBackoff     = time.Second
	DefaultLogInterval = time.Minute
)

// RedisOptions configures a Redis backend.
type RedisOptions struct {
	// Prefix starts every key, so the cache shares a Redis with other
	// data (DefaultPrefix when empty).
	Prefix string
	// Timeout bounds each Redis operation (DefaultTimeout when 0): a
	// slow Redis costs a request at most this much.
	Timeout time.Duration
	// Backoff is how long after a Redis error the backend answers misses
	// without asking Redis (DefaultBackoff when 0), so a Redis outage does
	// not add a dial timeout to every request.
	Backoff time.Duration
	// LogInterval is the least time between two logged Redis errors
	// (DefaultLogInterval when 0).
	LogInterval time.Duration
	// Logger receives those errors; nil logs nothing.
	Logger *zap.Logger
	// Now is the clock expiry is checked against; nil means time.Now.
	Now func() time.Time
}

// Redis is a Backend in Redis: each answer is one string value with a TTL
// of its max age, under Prefix followed by the hex of the cache key.
// Safe for concurrent use.
type Redis struct {
	c   redis.UniversalClient
	o   RedisOptions
	log *zap.Logger

	mu         sync.Mutex
	downUntil  time.Time
	lastLog    time.Time
	suppressed int
}

// NewRedis returns a backend storing answers through c (the llm app's
// shared client, app.RedisClient).
func NewRedis(c redis.UniversalClient, o RedisOptions) *Redis {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.LogInterval <= 0 {
		o.LogInterval = DefaultLogInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Redis{c: c, o: o, log: log}
}

// A stored value is a header — version, status, expiry — and the body.
const (
	version    = 1
	headerSize = 1 + 2 + 8
)

func encode(status int, expires time.Time, body []byte) []byte {
	v := make([]byte, headerSize+len(body))
	v[0] = version
	binary.BigEndian.PutUint16(v[1:], uint16(status))
	binary.BigEndian.PutUint64(v[3:], uint64(expires.UnixMilli()))
	copy(v[headerSize:], body)
	return v
}

func decode(v []byte) (*cache.Entry, bool) {
	if len(v) <= headerSize || len(v) > headerSize+cache.MaxEntrySize || v[0] != version {
		return nil, false
	}
	status := int(binary.BigEndian.Uint16(v[1:]))
	if status < 100 || status > 599 {
		return nil, false
	}
	exp := time.UnixMilli(int64(binary.BigEndian.Uint64(v[3:])))
	return &cache.Entry{Status: status, Body: v[headerSize:], Expires: exp}, true
}

func (r *Redis) redisKey(key string) string {
	return r.o.Prefix + hex.EncodeToString([]byte(key))
}

// Get returns the unexpired answer stored under key; a Redis error, a
// timeout or a malformed value is a miss.
func (r *Redis) Get(ctx context.Context, key string) (*cache.Entry, bool) {
	if r.down() {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	v, err := r.c.Get(ctx, r.redisKey(key)).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			r.failed("get", err)
		}
		return nil, false
	}
	e, ok := decode(v)
	if !ok || !r.o.Now().Before(e.Expires) {
		return nil, false
	}
	return e, true
}

// Set stores the answer with a TTL of maxAge (at most cache.MaxMaxAge).
// It reports false, storing nothing, for an empty or oversized body, a
// non-positive maxAge, or a Redis error.
func (r *Redis) Set(ctx context.Context, key string, status int, body []byte, maxAge time.Duration) bool {
	if len(body) == 0 || len(body) > cache.MaxEntrySize || maxAge <= 0 || status < 100 || status > 599 {
		return false
	}
	maxAge = min(maxAge, cache.MaxMaxAge)
	if maxAge < time.Millisecond {
		return false
	}
	if r.down() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	v := encode(status, r.o.Now().Add(maxAge), body)
	if err := r.c.Set(ctx, r.redisKey(key), v, maxAge).Err(); err != nil {
		r.failed("set", err)
		return false
	}
	return true
}

// down reports whether a recent error makes the backend skip Redis.
func (r *Redis) down() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.o.Now().Before(r.downUntil)
}

// failed records a Redis error: Redis is skipped for Backoff and the
// error is logged, at most once per LogInterval. An error caused by the
// caller's own cancellation says nothing about Redis and is ignored.
func (r *Redis) failed(op string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	now := r.o.Now()
	r.mu.Lock()
	r.downUntil = now.Add(r.o.Backoff)
	logIt := r.lastLog.IsZero() || now.Sub(r.lastLog) >= r.o.LogInterval
	suppressed := r.suppressed
	if logIt {
		r.lastLog, r.suppressed = now, 0
	} else {
		r.suppressed++
	}
	r.mu.Unlock()
	if logIt {
		r.log.Warn("shared response cache: Redis unavailable, answering cache misses",
			zap.String("op", op), zap.Error(err),
			zap.Int("errors_not_logged", suppressed),
			zap.Duration("retry_after", r.o.Backoff))
	}
}
