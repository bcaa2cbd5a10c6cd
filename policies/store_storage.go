package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/caddyserver/certmagic"
)

// StorageStore keeps each policy as a JSON file in Caddy's configured
// storage (the file system by default, a shared storage module when several
// instances run), under "<namespace>/<id>.json". Storage I/O happens only
// on writes, Get, List and the periodic reload of Active.
//
// Create checks that the id is free and then writes; the two steps are not
// locked against another instance, which is harmless because new ids are
// random UUIDs.
type StorageStore struct {
	storage certmagic.Storage
	prefix  string
	cfg     StoreConfig
	cache   activeCache
}

// NewStorageStore returns a store over storage, such as the one a Caddy
// module gets from ctx.Storage().
func NewStorageStore(storage certmagic.Storage, cfg StoreConfig) *StorageStore {
	cfg = cfg.withDefaults("llm_gateway/policies")
	s := &StorageStore{storage: storage, prefix: strings.TrimSuffix(cfg.Namespace, "/"), cfg: cfg}
	s.cache = activeCache{ttl: cfg.CacheTTL, now: cfg.Now, onErr: cfg.OnRefreshError,
		load: func(ctx context.Context) ([]*Policy, string, error) {
			ps, err := s.loadAll(ctx)
			return ps, "", err
		}}
	return s
}

var _ CachedStore = (*StorageStore)(nil)

func (s *StorageStore) key(id string) string { return s.prefix + "/" + id + ".json" }

// Create implements Store.
func (s *StorageStore) Create(ctx context.Context, p *Policy) error {
	if err := prepareCreate(p, s.cfg.Now()); err != nil {
		return err
	}
	if s.storage.Exists(ctx, s.key(p.ID)) {
		return ErrExists
	}
	return s.write(ctx, p)
}

// Put implements Store.
func (s *StorageStore) Put(ctx context.Context, p *Policy) error {
	if err := preparePut(p, s.cfg.Now()); err != nil {
		return err
	}
	return s.write(ctx, p)
}

func (s *StorageStore) write(ctx context.Context, p *Policy) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	err = s.storage.Store(ctx, s.key(p.ID), data)
	// Invalidate even on error: the write may have half happened.
	s.cache.invalidate()
	if err != nil {
		return fmt.Errorf("policies: storing policy %s: %w", p.ID, err)
	}
	return nil
}

// Get implements Store. Ids that are not UUIDs are never looked up, so a
// path segment like "../x" cannot reach other storage keys.
func (s *StorageStore) Get(ctx context.Context, id string) (*Policy, error) {
	if !validUUID(id) {
		return nil, ErrNotFound
	}
	data, err := s.storage.Load(ctx, s.key(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("policies: loading policy %s: %w", id, err)
	}
	p, err := decodePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("policies: decoding policy %s: %w", id, err)
	}
	p.Object = ObjectRateLimits
	return p, nil
}

// List implements Store.
func (s *StorageStore) List(ctx context.Context, workspaceID string) ([]*Policy, error) {
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
func (s *StorageStore) Active(ctx context.Context) ([]*Policy, error) {
	return s.cache.get(ctx)
}

// loadAll reads every record under the prefix. A record deleted between
// listing and loading is skipped; a record that cannot be decoded fails the
// whole load, so Active keeps its previous set rather than silently
// dropping a limit.
func (s *StorageStore) loadAll(ctx context.Context) ([]*Policy, error) {
	keys, err := s.storage.List(ctx, s.prefix, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("policies: listing %s: %w", s.prefix, err)
	}
	out := make([]*Policy, 0, len(keys))
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") || !validUUID(strings.TrimSuffix(path.Base(k), ".json")) {
			continue
		}
		data, err := s.storage.Load(ctx, k)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("policies: loading %s: %w", k, err)
		}
		p, err := decodePolicy(data)
		if err != nil {
			return nil, fmt.Errorf("policies: decoding %s: %w", k, err)
		}
		out = append(out, p)
	}
	sortPolicies(out)
	return out, nil
}
