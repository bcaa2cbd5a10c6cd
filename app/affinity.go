package app

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/logthrottle"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/routing"
)

// Session pins of loadbalance affinity (routing/affinity.go). The store
// lives in gatewayPool, so pins survive reloads; with `llm { redis … }`
// pins are shared through Redis under <key_prefix>llm:affinity:<hex>, and
// each replica keeps a local copy in front of it.

// affinityKeyPart starts every pin's Redis key after the key_prefix.
const affinityKeyPart = "llm:affinity:"

// pinTimeout bounds one pin round trip; pinBackoff is how long Redis is
// left alone after an error, so an outage costs each request nothing
// more than the local decision.
const (
	pinTimeout = 250 * time.Millisecond
	pinBackoff = time.Second
)

// pinScript settles a pin (KEYS[1]): the pin it holds is kept unless it
// is ARGV[1] (the pin being replaced, "" for none), else ARGV[2] becomes
// the pin; either way it lives ARGV[3] ms more. It returns the pin.
var pinScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return v
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return ARGV[2]
`)

// dropScript deletes a pin (KEYS[1]) only if it is still ARGV[1].
var dropScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// redisPins is the routing.PinRemote on the llm app's Redis.
type redisPins struct {
	client redis.UniversalClient
	prefix string
	logger *zap.Logger
	// downUntil is the UnixNano until which Redis is not asked.
	downUntil atomic.Int64
	warn      logthrottle.Throttle
}

func (p *redisPins) key(k uint64) string {
	return p.prefix + affinityKeyPart + strconv.FormatUint(k, 16)
}

// Pin implements routing.PinRemote: the remote pin is doubled in life
// (2×ttl) so a replica whose local copy expired finds it again.
func (p *redisPins) Pin(ctx context.Context, key uint64, old, cand int, ttl time.Duration) (int, error) {
	if err := p.up(); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pinTimeout)
	defer cancel()
	oldArg := ""
	if old >= 0 {
		oldArg = strconv.Itoa(old)
	}
	v, err := pinScript.Run(ctx, p.client, []string{p.key(key)}, oldArg, strconv.Itoa(cand), (2 * ttl).Milliseconds()).Text()
	if err != nil {
		return 0, p.failed(err)
	}
	won, err := strconv.Atoi(v)
	if err != nil || won < 0 {
		// Not a pin this gateway wrote: replace it.
		return cand, nil
	}
	return won, nil
}

// Drop implements routing.PinRemote.
func (p *redisPins) Drop(ctx context.Context, key uint64, child int) error {
	if err := p.up(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pinTimeout)
	defer cancel()
	if err := dropScript.Run(ctx, p.client, []string{p.key(key)}, strconv.Itoa(child)).Err(); err != nil {
		return p.failed(err)
	}
	return nil
}

var errPinsBackoff = redisUnavailable("redis left alone after an error")

type redisUnavailable string

func (e redisUnavailable) Error() string { return string(e) }

func (p *redisPins) up() error {
	if time.Now().UnixNano() < p.downUntil.Load() {
		return errPinsBackoff
	}
	return nil
}

// failed notes a Redis error: pins are decided locally for pinBackoff,
// and the error is logged at most once a minute.
func (p *redisPins) failed(err error) error {
	now := time.Now()
	p.downUntil.Store(now.Add(pinBackoff).UnixNano())
	if ok, skipped := p.warn.Allow(now, time.Minute); ok {
		p.logger.Warn("session affinity: redis unavailable, pins are kept per instance", zap.Error(err), zap.Int64("suppressed", skipped))
	}
	return err
}

type pooledPins struct{ *routing.PinStore }

// Destruct has nothing to release: pins are plain memory.
func (pooledPins) Destruct() error { return nil }

// Pins returns the session pins of loadbalance affinity, shared by every
// route and kept across reloads while the Redis settings stay the same,
// and the function that releases this caller's use of them.
func (a *App) Pins() (*routing.PinStore, func(), error) {
	key := "llm.pins"
	if a.redis != nil {
		key += "|" + a.redisKey + "|" + a.RedisKeyPrefix()
	}
	v, _, err := gatewayPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		var remote routing.PinRemote
		if a.redis != nil {
			logger := a.logger
			if logger == nil {
				logger = zap.NewNop()
			}
			remote = &redisPins{client: a.redis, prefix: a.RedisKeyPrefix(), logger: logger}
		}
		return pooledPins{routing.NewPinStore(Now, remote)}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v.(pooledPins).PinStore, release(key), nil
}
