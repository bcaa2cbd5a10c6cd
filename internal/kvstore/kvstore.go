// Package kvstore is the one record store shape of the gateway's
// control-plane records (files, batch records, stored responses): a
// key-value interface that Caddy's certmagic.Storage satisfies as it is,
// and a Redis adapter for gateways that share a Redis instead.
package kvstore

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// KV is the storage records live in. certmagic.Storage
// (what a Caddy module gets from ctx.Storage()) satisfies it; RedisKV
// adapts a Redis client. Load must return an error wrapping fs.ErrNotExist
// for a missing key; List returns full keys under prefix (recursive: at
// any depth, else direct children only) and may return fs.ErrNotExist
// for an empty prefix.
type KV interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, recursive bool) ([]string, error)
}

// Redis keeps records in Redis, for gateways that share a Redis instead
// of a Caddy storage module. With a TTL every key expires after it, so
// Redis itself drops old records; without one keys stay until deleted.
type Redis struct {
	client redis.UniversalClient
	ttl    time.Duration
}

// NewRedis returns a KV over client whose keys expire after ttl (0: never).
func NewRedis(client redis.UniversalClient, ttl time.Duration) *Redis {
	return &Redis{client: client, ttl: ttl}
}

// Store implements KV.
func (r *Redis) Store(ctx context.Context, key string, value []byte) error {
	return r.client.Set(ctx, key, value, r.ttl).Err()
}

// Load implements KV; a missing key wraps fs.ErrNotExist.
func (r *Redis) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := r.client.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fs.ErrNotExist
	}
	return b, err
}

// Delete implements KV.
func (r *Redis) Delete(ctx context.Context, key string) error {
	return r.client.Del(ctx, key).Err()
}

// List implements KV with SCAN, so it never blocks Redis as KEYS would.
func (r *Redis) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	var out []string
	it := r.client.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	for it.Next(ctx) {
		k := it.Val()
		if !recursive && strings.Contains(k[len(prefix):], "/") {
			continue
		}
		out = append(out, k)
	}
	return out, it.Err()
}

// escapeGlob quotes Redis glob metacharacters in a literal prefix.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// listAttempts bounds ListKeys' retries.
const listAttempts = 10

// ListKeys lists keys under prefix, treating a missing prefix as empty.
// Caddy's file storage walks the folder, and a temporary file of a
// concurrent atomic write that vanishes mid-walk ends the walk with
// fs.ErrNotExist and a partial list; ListKeys tells that apart from a
// missing prefix (with the storage's Exists) and lists again.
func ListKeys(ctx context.Context, kv KV, prefix string, recursive bool) ([]string, error) {
	type exister interface {
		Exists(ctx context.Context, key string) bool
	}
	for i := 0; ; i++ {
		keys, err := kv.List(ctx, prefix, recursive)
		if err == nil {
			return keys, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		ex, ok := kv.(exister)
		if !ok || !ex.Exists(ctx, prefix) {
			return keys, nil
		}
		if i+1 == listAttempts {
			return nil, err
		}
	}
}
