package policies

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Store keeps policy records. Implementations are safe for concurrent use.
// Records returned by Get and List are the caller's to modify and have
// Object set to ObjectRateLimits.
type Store interface {
	// Create stores a new policy. It fills an empty ID with a new UUID, an
	// empty Status with active, and CreatedAt and LastUpdatedAt with the
	// current time, in p itself so the caller can answer with the id; then
	// it validates the record (*FieldError) and fails with ErrExists if
	// the id is taken.
	Create(ctx context.Context, p *Policy) error
	// Get returns the policy with this id, whatever its status, or
	// ErrNotFound.
	Get(ctx context.Context, id string) (*Policy, error)
	// List returns the policies of a workspace (all workspaces for ""),
	// active and archived, oldest first.
	List(ctx context.Context, workspaceID string) ([]*Policy, error)
	// Put creates or replaces the policy with p.ID, setting LastUpdatedAt
	// to now (and CreatedAt when zero), after validating it.
	Put(ctx context.Context, p *Policy) error
}

// CachedStore is a Store that also serves the active policy set from memory,
// which is what admission uses on every request. All stores of this package
// implement it.
type CachedStore interface {
	Store
	// Active returns the active policies, oldest first. The slice and the
	// policies are shared: read them, never modify them.
	Active(ctx context.Context) ([]*Policy, error)
}

// ErrNotFound is returned by Store.Get for an unknown id (HTTP 404).
var ErrNotFound = errors.New("policies: policy not found")

// ErrExists is returned by Store.Create when the id is already taken.
var ErrExists = errors.New("policies: policy already exists")

// StoreConfig configures the stores. The zero value is usable.
type StoreConfig struct {
	// Namespace is where records live: the storage key prefix of a
	// StorageStore (default "llm_gateway/policies") or the hash key of a
	// RedisStore (default "llmgw:policies"). MemoryStore ignores it.
	Namespace string
	// CacheTTL is how long Active serves its cached set before checking
	// it again (default 5s; 1s for a RedisStore, whose check is one GET of
	// a version key). It bounds how long another instance's writes take to
	// be enforced here when no change notice arrives; this instance's own
	// writes apply at once, and a RedisStore that Watches applies the
	// others' as soon as their notice arrives.
	CacheTTL time.Duration
	// Now replaces time.Now, for timestamps and the cache, in tests.
	Now func() time.Time
	// OnRefreshError, when set, is told about a failed reload of the
	// active set; Active keeps serving the previous set meanwhile.
	OnRefreshError func(error)
}

func (c StoreConfig) withDefaults(namespace string) StoreConfig {
	if c.Namespace == "" {
		c.Namespace = namespace
	}
	if c.CacheTTL <= 0 {
		c.CacheTTL = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// prepareCreate fills the server-set fields of a new record and validates it.
func prepareCreate(p *Policy, now time.Time) error {
	if p.ID == "" {
		// A UUIDv7 rises with every id this process makes, so records
		// created in one millisecond still list in creation order
		// (sortPolicies breaks CreatedAt ties by id).
		p.ID = uuid.Must(uuid.NewV7()).String()
	}
	if p.Status == "" {
		p.Status = StatusActive
	}
	now = now.UTC().Truncate(time.Millisecond)
	p.CreatedAt, p.LastUpdatedAt = now, now
	p.Object = ""
	return p.Validate()
}

// preparePut stamps a replaced record and validates it.
func preparePut(p *Policy, now time.Time) error {
	now = now.UTC().Truncate(time.Millisecond)
	if p.CreatedAt.IsZero() {
		p.CreatedAt = now
	}
	p.LastUpdatedAt = now
	p.Object = ""
	return p.Validate()
}

// sortPolicies orders records oldest first, by id on ties, so listings are
// stable across stores.
func sortPolicies(ps []*Policy) {
	slices.SortFunc(ps, func(a, b *Policy) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// inWorkspace keeps the records of one workspace ("" keeps all).
func inWorkspace(ps []*Policy, workspaceID string) []*Policy {
	if workspaceID == "" {
		return ps
	}
	out := ps[:0]
	for _, p := range ps {
		if p.WorkspaceID == workspaceID {
			out = append(out, p)
		}
	}
	return out
}

// activeOnly returns the active records of a loaded set, as a new slice.
func activeOnly(ps []*Policy) []*Policy {
	out := make([]*Policy, 0, len(ps))
	for _, p := range ps {
		if p.Status == StatusActive {
			out = append(out, p)
		}
	}
	return out
}

// activeCache holds the active policy set of a store with storage I/O
// behind it. The fresh path is two atomic loads and a clock read, with no
// allocation. Once the set is older than the TTL, or after invalidate,
// every caller waits for one reload instead of being served the old set,
// because a request arriving after a change is known must see it (a burst
// on an idle instance would otherwise pass a new limit with the old set).
// With a version probe (RedisStore), the reload after the TTL first asks
// for the store's version, one round trip, and reads the records only when
// it moved. A write through the same store invalidates the set, so an
// instance enforces its own writes at once.
type activeCache struct {
	ttl     time.Duration
	now     func() time.Time
	load    func(ctx context.Context) ([]*Policy, string, error)
	version func(ctx context.Context) (string, error)
	onErr   func(error)

	state  atomic.Pointer[activeState]
	gen    atomic.Uint64
	reload sync.Mutex
}

type activeState struct {
	set     []*Policy
	version string
	fetched time.Time
	gen     uint64
}

func (c *activeCache) fresh(s *activeState) bool {
	return s != nil && s.gen == c.gen.Load() && c.now().Sub(s.fetched) < c.ttl
}

// invalidate makes the next get reload.
func (c *activeCache) invalidate() { c.gen.Add(1) }

// get returns the active set; it is shared and must not be modified.
func (c *activeCache) get(ctx context.Context) ([]*Policy, error) {
	s := c.state.Load()
	if c.fresh(s) {
		return s.set, nil
	}
	c.reload.Lock()
	defer c.reload.Unlock()
	if s = c.state.Load(); c.fresh(s) {
		return s.set, nil
	}
	gen := c.gen.Load()
	if s != nil && s.gen == gen && c.version != nil {
		// Merely old: if the store's version has not moved, the set is
		// still current, and one small read renews it.
		if v, err := c.version(ctx); err == nil && v == s.version {
			c.state.Store(&activeState{set: s.set, version: v, fetched: c.now(), gen: gen})
			return s.set, nil
		}
	}
	set, version, err := c.load(ctx)
	if err != nil {
		if s == nil {
			return nil, err
		}
		if c.onErr != nil {
			c.onErr(err)
		}
		// Keep the previous set and retry after another TTL, rather than
		// sending every request to a storage that is down.
		c.state.Store(&activeState{set: s.set, version: s.version, fetched: c.now(), gen: gen})
		return s.set, nil
	}
	set = activeOnly(set)
	c.state.Store(&activeState{set: set, version: version, fetched: c.now(), gen: gen})
	return set, nil
}

// MemoryStore keeps policies in process: for tests, and for policies
// declared in the Caddyfile, which are rebuilt on each config load.
type MemoryStore struct {
	now    func() time.Time
	mu     sync.RWMutex
	byID   map[string]*Policy
	active atomic.Pointer[[]*Policy]
}

// NewMemoryStore returns an empty MemoryStore; it uses cfg.Now only.
func NewMemoryStore(cfg StoreConfig) *MemoryStore {
	cfg = cfg.withDefaults("")
	s := &MemoryStore{now: cfg.Now, byID: make(map[string]*Policy)}
	empty := []*Policy{}
	s.active.Store(&empty)
	return s
}

var _ CachedStore = (*MemoryStore)(nil)

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, p *Policy) error {
	if err := prepareCreate(p, s.now()); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[p.ID]; ok {
		return ErrExists
	}
	s.byID[p.ID] = p.Clone()
	s.rebuildLocked()
	return nil
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, p *Policy) error {
	if err := preparePut(p, s.now()); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[p.ID] = p.Clone()
	s.rebuildLocked()
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id string) (*Policy, error) {
	s.mu.RLock()
	p, ok := s.byID[id]
	s.mu.RUnlock()
	if !ok {
		return nil, ErrNotFound
	}
	c := p.Clone()
	c.Object = ObjectRateLimits
	return c, nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, workspaceID string) ([]*Policy, error) {
	s.mu.RLock()
	out := make([]*Policy, 0, len(s.byID))
	for _, p := range s.byID {
		if workspaceID == "" || p.WorkspaceID == workspaceID {
			c := p.Clone()
			c.Object = ObjectRateLimits
			out = append(out, c)
		}
	}
	s.mu.RUnlock()
	sortPolicies(out)
	return out, nil
}

// Active returns the active policies, oldest first. The slice and the
// policies are shared: read them, never modify them. It never allocates.
func (s *MemoryStore) Active(context.Context) ([]*Policy, error) {
	return *s.active.Load(), nil
}

// rebuildLocked recomputes the active set after a write; s.mu is held.
func (s *MemoryStore) rebuildLocked() {
	all := make([]*Policy, 0, len(s.byID))
	for _, p := range s.byID {
		all = append(all, p)
	}
	sortPolicies(all)
	set := activeOnly(all)
	s.active.Store(&set)
}
