package budgets

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// storePrefix is where usage limits are kept in the KV.
const storePrefix = "llm/usage-limits/"

// refreshEvery bounds how stale another instance's view of the limits
// is: this instance's own writes apply at once.
const refreshEvery = 2 * time.Second

// MaxLimits bounds the usage limits a store keeps, so the set every
// request is matched against stays small.
const MaxLimits = 1000

// ErrNotFound is returned for a missing usage limit.
var ErrNotFound = errors.New("budgets: usage limit not found")

// ErrTooMany is returned by Create past MaxLimits.
var ErrTooMany = errors.New("budgets: too many usage limits")

// Store keeps usage limits in a KV (Caddy storage, or Redis for a
// cluster) and serves the active ones from memory.
type Store struct {
	kv     kvstore.KV
	now    func() time.Time
	snap   atomic.Pointer[snapshot]
	loadMu sync.Mutex
}

type snapshot struct {
	all    []*UsageLimit
	active []*UsageLimit
	at     time.Time
}

// NewStore returns a store over kv.
func NewStore(kv kvstore.KV, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{kv: kv, now: now}
}

// Active implements Source: the active limits, reloaded from the KV
// when older than refreshEvery (by one caller; others use the previous
// set meanwhile).
func (s *Store) Active(ctx context.Context) ([]*UsageLimit, error) {
	snap := s.snap.Load()
	if snap != nil && s.now().Sub(snap.at) < refreshEvery {
		return snap.active, nil
	}
	if snap != nil && !s.loadMu.TryLock() {
		return snap.active, nil
	}
	if snap == nil {
		s.loadMu.Lock()
	}
	defer s.loadMu.Unlock()
	next, err := s.load(ctx)
	if err != nil {
		if snap != nil {
			return snap.active, nil
		}
		return nil, err
	}
	return next.active, nil
}

// load reads every limit from the KV.
func (s *Store) load(ctx context.Context) (*snapshot, error) {
	keys, err := kvstore.ListKeys(ctx, s.kv, strings.TrimSuffix(storePrefix, "/"), false)
	if err != nil {
		return nil, err
	}
	next := &snapshot{at: s.now()}
	for _, k := range keys {
		b, err := s.kv.Load(ctx, k)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var u UsageLimit
		if json.Unmarshal(b, &u) != nil || u.Prepare() != nil {
			continue
		}
		next.all = append(next.all, &u)
		if u.Status == policies.StatusActive {
			next.active = append(next.active, &u)
		}
	}
	slices.SortFunc(next.all, func(a, b *UsageLimit) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	s.snap.Store(next)
	return next, nil
}

// invalidate makes the next Active reload.
func (s *Store) invalidate() { s.snap.Store(nil) }

// Create stores a new limit, prepared by the caller.
func (s *Store) Create(ctx context.Context, u *UsageLimit) error {
	snap, err := s.load(ctx)
	if err != nil {
		return err
	}
	if len(snap.all) >= MaxLimits {
		return ErrTooMany
	}
	now := s.now().UTC()
	u.CreatedAt, u.LastUpdatedAt = now, now
	return s.put(ctx, u)
}

// Put replaces an existing limit.
func (s *Store) Put(ctx context.Context, u *UsageLimit) error {
	u.LastUpdatedAt = s.now().UTC()
	return s.put(ctx, u)
}

func (s *Store) put(ctx context.Context, u *UsageLimit) error {
	rec := u.Clone()
	rec.Object = ""
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	defer s.invalidate()
	return s.kv.Store(ctx, storePrefix+u.ID, b)
}

// Get returns a copy of the limit id.
func (s *Store) Get(ctx context.Context, id string) (*UsageLimit, error) {
	b, err := s.kv.Load(ctx, storePrefix+id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var u UsageLimit
	if err := json.Unmarshal(b, &u); err != nil {
		return nil, err
	}
	if err := u.Prepare(); err != nil {
		return nil, err
	}
	u.Object = ObjectUsageLimits
	return &u, nil
}

// List returns copies of the limits in scope of a workspace and
// organisation (all of an organisation's when workspace is empty).
func (s *Store) List(ctx context.Context, workspace, organisation string) ([]*UsageLimit, error) {
	snap, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	var out []*UsageLimit
	for _, u := range snap.all {
		if u.OrganisationID != organisation || (workspace != "" && u.WorkspaceID != workspace) {
			continue
		}
		c := u.Clone()
		c.Object = ObjectUsageLimits
		out = append(out, c)
	}
	return out, nil
}

// Delete removes the limit id.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	defer s.invalidate()
	return s.kv.Delete(ctx, storePrefix+id)
}
