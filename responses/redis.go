package responses

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisKV keeps records in Redis with an expiry equal to the retention,
// so Redis itself drops old responses; for gateways that share a Redis
// instead of a Caddy storage module.
type RedisKV struct {
	client redis.UniversalClient
	ttl    time.Duration
}

// NewRedisKV returns a KV over client whose keys expire after ttl
// (DefaultRetention when zero); pass the Store's Retention.
func NewRedisKV(client redis.UniversalClient, ttl time.Duration) *RedisKV {
	if ttl <= 0 {
		ttl = DefaultRetention
	}
	return &RedisKV{client: client, ttl: ttl}
}

// Store implements KV.
func (r *RedisKV) Store(ctx context.Context, key string, value []byte) error {
	return r.client.Set(ctx, key, value, r.ttl).Err()
}

// Load implements KV; a missing key wraps fs.ErrNotExist.
func (r *RedisKV) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := r.client.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fs.ErrNotExist
	}
	return b, err
}

// Delete implements KV.
func (r *RedisKV) Delete(ctx context.Context, key string) error {
	return r.client.Del(ctx, key).Err()
}
