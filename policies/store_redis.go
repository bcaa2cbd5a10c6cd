package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore keeps the policies in one Redis hash (default
// "llmgw:policies"), id to JSON record, for gateways that share a Redis
// for their counters. Every write also increments a version field of the
// same hash (":version", never a UUID, so never a policy id; one key, so
// Redis Cluster can run the write as one script) and publishes the new
// version on a channel ("<hash>:changed") in the same step, so other instances learn of it at
// once (Watch) or, when a notice is lost, at their next version check
// (CacheTTL, 1s by default); see activeCache for why no request arriving
// after that is served the old set.
type RedisStore struct {
	client  redis.UniversalClient
	key     string
	channel string
	cfg     StoreConfig
	cache   activeCache
}

// NewRedisStore returns a store in client under cfg.Namespace.
func NewRedisStore(client redis.UniversalClient, cfg StoreConfig) *RedisStore {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = time.Second
	}
	cfg = cfg.withDefaults("llmgw:policies")
	s := &RedisStore{client: client, key: cfg.Namespace, channel: cfg.Namespace + ":changed", cfg: cfg}
	s.cache = activeCache{ttl: cfg.CacheTTL, now: cfg.Now, load: s.loadActive, version: s.currentVersion,
		onErr: cfg.OnRefreshError}
	return s
}

var _ CachedStore = (*RedisStore)(nil)

// versionField is the hash field counting writes; policy ids are UUIDs, so
// it is never one.
const versionField = ":version"

// writeScript stores a record, bumps the version and announces it, as one
// atomic step: no instance can read the new version with the old record.
// ARGV[3] = "1" makes it a create, which fails (returns -1) when the id is
// taken.
var writeScript = redis.NewScript(`
if ARGV[3] == "1" then
  if redis.call("HSETNX", KEYS[1], ARGV[1], ARGV[2]) == 0 then return -1 end
else
  redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
end
local v = redis.call("HINCRBY", KEYS[1], ARGV[4], 1)
redis.call("PUBLISH", ARGV[5], v)
return v
`)

func (s *RedisStore) write(ctx context.Context, p *Policy, create bool) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	flag := "0"
	if create {
		flag = "1"
	}
	n, err := writeScript.Run(ctx, s.client, []string{s.key}, p.ID, data, flag, versionField, s.channel).Int64()
	s.cache.invalidate()
	if err != nil {
		return fmt.Errorf("policies: redis write %s: %w", p.ID, err)
	}
	if n < 0 {
		return ErrExists
	}
	return nil
}

// Create implements Store.
func (s *RedisStore) Create(ctx context.Context, p *Policy) error {
	if err := prepareCreate(p, s.cfg.Now()); err != nil {
		return err
	}
	return s.write(ctx, p, true)
}

// Put implements Store.
func (s *RedisStore) Put(ctx context.Context, p *Policy) error {
	if err := preparePut(p, s.cfg.Now()); err != nil {
		return err
	}
	return s.write(ctx, p, false)
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
	all, _, err := s.loadActive(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range all {
		p.Object = ObjectRateLimits
	}
	return inWorkspace(all, workspaceID), nil
}

// Active returns the active policies, oldest first, from a cache checked
// against the version key at most every CacheTTL and dropped at once on a
// change notice (see Watch). The slice and the policies are shared: read
// them, never modify them. The cached path never allocates.
func (s *RedisStore) Active(ctx context.Context) ([]*Policy, error) {
	return s.cache.get(ctx)
}

// Watch listens for other instances' change notices until ctx ends, and
// drops the cached set on each, so their writes are enforced here as soon
// as the notice arrives. It also drops the set whenever the subscription is
// (re)established, since notices sent while it was down are lost.
// onNotice, when set, is called after each drop (tests wait on it).
func (s *RedisStore) Watch(ctx context.Context, onNotice func()) {
	for ctx.Err() == nil {
		sub := s.client.Subscribe(ctx, s.channel)
		if _, err := sub.Receive(ctx); err == nil {
			s.cache.invalidate()
			s.drain(ctx, sub, onNotice)
		}
		_ = sub.Close()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// drain invalidates the cache on every message until the subscription or
// ctx ends.
func (s *RedisStore) drain(ctx context.Context, sub *redis.PubSub, onNotice func()) {
	ch := sub.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ch:
			if !ok {
				return
			}
			s.cache.invalidate()
			if onNotice != nil {
				onNotice()
			}
		}
	}
}

// currentVersion reads the version key ("" before the first write).
func (s *RedisStore) currentVersion(ctx context.Context) (string, error) {
	v, err := s.client.HGet(ctx, s.key, versionField).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// loadActive reads the whole hash, records and version in one read; a
// record that cannot be decoded fails the load, so Active keeps its
// previous set rather than dropping a limit.
func (s *RedisStore) loadActive(ctx context.Context) ([]*Policy, string, error) {
	m, err := s.client.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, "", fmt.Errorf("policies: redis list: %w", err)
	}
	version := m[versionField]
	out := make([]*Policy, 0, len(m))
	for id, data := range m {
		if id == versionField {
			continue
		}
		p, err := decodePolicy([]byte(data))
		if err != nil {
			return nil, "", fmt.Errorf("policies: decoding policy %s: %w", id, err)
		}
		out = append(out, p)
	}
	sortPolicies(out)
	return out, version, nil
}
