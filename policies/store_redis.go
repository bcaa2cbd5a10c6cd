package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// RedisStore keeps the policies in one Redis hash (default
// "llmgw:policies"), id to JSON record, for gateways that already share a
// Redis for their counters and want policy edits to reach every instance
// within one CacheTTL without a shared Caddy storage module.
type RedisStore struct {
	client redis.UniversalClient
	key    string
	cfg    StoreConfig
	cache  activeCache
}

// NewRedisStore returns a store in client under cfg.Namespace.
func NewRedisStore(client redis.UniversalClient, cfg StoreConfig) *RedisStore {
	cfg = cfg.withDefaults("llmgw:policies")
	s := &RedisStore{client: client, key: cfg.Namespace, cfg: cfg}
	s.cache = activeCache{ttl: cfg.CacheTTL, now: cfg.Now, load: s.loadAll, onErr: cfg.OnRefreshError}
	return s
}

var _ CachedStore = (*RedisStore)(nil)

// Create implements Store; HSETNX makes "the id is free" and the write one
// atomic step.
func (s *RedisStore) Create(ctx context.Context, p *Policy) error {
	if err := prepareCreate(p, s.cfg.Now()); err != nil {
		return err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ok, err := s.client.HSetNX(ctx, s.key, p.ID, data).Result()
	s.cache.invalidate()
	if err != nil {
		return fmt.Errorf("policies: redis create %s: %w", p.ID, err)
	}
	if !ok {
		return ErrExists
	}
	return nil
}

// Put implements Store.
func (s *RedisStore) Put(ctx context.Context, p *Policy) error {
	if err := preparePut(p, s.cfg.Now()); err != nil {
		return err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	err = s.client.HSet(ctx, s.key, p.ID, data).Err()
	s.cache.invalidate()
	if err != nil {
		return fmt.Errorf("policies: redis put %s: %w", p.ID, err)
	}
	return nil
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, id string) (*Policy, error) {
	data, err := s.client.HGet(ctx, s.key, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("policies: redis get %s: %w", id, err)
	}
	p, err := decodePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("policies: decoding policy %s: %w", id, err)
	}
	p.Object = ObjectRateLimits
	return p, nil
}

// List implements Store.
func (s *RedisStore) List(ctx context.Context, workspaceID string) ([]*Policy, error) {
	all, err := s.loadAll(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range all {
		p.Object = ObjectRateLimits
	}
	return inWorkspace(all, workspaceID), nil
}

// Active returns the active policies, oldest first, from a cache reloaded
// at most every CacheTTL (see StoreConfig). The slice and the policies are
// shared: read them, never modify them. The cached path never allocates.
func (s *RedisStore) Active(ctx context.Context) ([]*Policy, error) {
	return s.cache.get(ctx)
}

// loadAll reads the whole hash; a record that cannot be decoded fails the
// load, so Active keeps its previous set rather than dropping a limit.
func (s *RedisStore) loadAll(ctx context.Context) ([]*Policy, error) {
	m, err := s.client.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("policies: redis list: %w", err)
	}
	out := make([]*Policy, 0, len(m))
	for id, data := range m {
		p, err := decodePolicy([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("policies: decoding policy %s: %w", id, err)
		}
		out = append(out, p)
	}
	sortPolicies(out)
	return out, nil
}
