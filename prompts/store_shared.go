package prompts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// StorageStore keeps each prompt as "<prefix>/<id>.json" in Caddy's
// configured storage: the file system by default, or a shared storage
// module when several instances run. Writes hold the storage's lock, which
// certmagic storages implement across instances, so two instances never
// give a prompt the same version number or a workspace the same slug.
type StorageStore struct {
	storage certmagic.Storage
	prefix  string
}

// NewStorageStore returns a store under prefix (default
// "llm_gateway/prompts") in storage.
func NewStorageStore(storage certmagic.Storage, prefix string) *StorageStore {
	if prefix == "" {
		prefix = "llm_gateway/prompts"
	}
	return &StorageStore{storage: storage, prefix: strings.TrimSuffix(prefix, "/")}
}

func (s *StorageStore) key(id string) string { return s.prefix + "/" + id + ".json" }

// Load implements Store. A record that cannot be decoded fails the load,
// so the registry keeps its previous snapshot instead of silently losing
// a prompt.
func (s *StorageStore) Load(ctx context.Context) ([]*Prompt, error) {
	keys, err := s.storage.List(ctx, s.prefix, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("prompts: listing %s: %w", s.prefix, err)
	}
	out := make([]*Prompt, 0, len(keys))
	for _, k := range keys {
		id, ok := strings.CutSuffix(path.Base(k), ".json")
		if !ok || uuid.Validate(id) != nil {
			continue
		}
		data, err := s.storage.Load(ctx, k)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted between List and Load
		}
		if err != nil {
			return nil, fmt.Errorf("prompts: loading %s: %w", k, err)
		}
		p, err := decodeRecord(data)
		if err != nil {
			return nil, fmt.Errorf("prompts: decoding %s: %w", k, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Mutate implements Store.
func (s *StorageStore) Mutate(ctx context.Context, fn func([]*Prompt) ([]*Prompt, []string, error)) error {
	lock := strings.ReplaceAll(s.prefix, "/", "_")
	if err := s.storage.Lock(ctx, lock); err != nil {
		return fmt.Errorf("prompts: locking storage: %w", err)
	}
	defer func() { _ = s.storage.Unlock(context.WithoutCancel(ctx), lock) }()
	all, err := s.Load(ctx)
	if err != nil {
		return err
	}
	put, del, err := fn(all)
	if err != nil {
		return err
	}
	for _, p := range put {
		data, err := encodeRecord(p)
		if err != nil {
			return err
		}
		if err := s.storage.Store(ctx, s.key(p.ID), data); err != nil {
			return fmt.Errorf("prompts: storing %s: %w", p.ID, err)
		}
	}
	for _, id := range del {
		if err := s.storage.Delete(ctx, s.key(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("prompts: deleting %s: %w", id, err)
		}
	}
	return nil
}

// RedisStore keeps the prompts in one Redis hash (default "llmgw:prompts"),
// id to record, for gateways that share a Redis. Writes are optimistic
// transactions on the hash (WATCH/MULTI), retried when another instance
// wrote in between.
type RedisStore struct {
	client redis.UniversalClient
	key    string
}

// NewRedisStore returns a store in client under key.
func NewRedisStore(client redis.UniversalClient, key string) *RedisStore {
	if key == "" {
		key = "llmgw:prompts"
	}
	return &RedisStore{client: client, key: key}
}

// Load implements Store.
func (s *RedisStore) Load(ctx context.Context) ([]*Prompt, error) {
	return s.load(ctx, s.client)
}

func (s *RedisStore) load(ctx context.Context, c redis.Cmdable) ([]*Prompt, error) {
	m, err := c.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("prompts: redis load: %w", err)
	}
	out := make([]*Prompt, 0, len(m))
	for id, data := range m {
		p, err := decodeRecord([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("prompts: decoding %s: %w", id, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Mutate implements Store.
func (s *RedisStore) Mutate(ctx context.Context, fn func([]*Prompt) ([]*Prompt, []string, error)) error {
	// Optimistic: WATCH the hash, write in MULTI, start over when another
	// writer got there first. Writers that collide back off for a random
	// while (full jitter, capped), so a burst of concurrent writers
	// spreads out instead of failing after a fixed number of collisions.
	const attempts = 50
	for i := 0; i < attempts; i++ {
		if i > 0 {
			wait := time.Duration(rand.Int64N(int64(min(time.Millisecond<<min(i, 6), 50*time.Millisecond)) + 1))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		err := s.client.Watch(ctx, func(tx *redis.Tx) error {
			all, err := s.load(ctx, tx)
			if err != nil {
				return err
			}
			put, del, err := fn(all)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for _, rec := range put {
					data, err := encodeRecord(rec)
					if err != nil {
						return err
					}
					p.HSet(ctx, s.key, rec.ID, data)
				}
				if len(del) > 0 {
					p.HDel(ctx, s.key, del...)
				}
				return nil
			})
			return err
		}, s.key)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return fmt.Errorf("prompts: redis write kept conflicting with other writers")
}
