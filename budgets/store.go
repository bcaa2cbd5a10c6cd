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

// refreshEvery bounds how stale another instance's view of the limits is
// when its change notice was lost (notice.go); this instance's own
// writes apply at once, and others' as soon as their notice arrives.
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
	// notice announces writes to the other instances and versions the
	// set (notice.go); nil for a store no other instance reads.
	notice Notifier
	// OnUnknown, when set, is told that the set could not be read while
	// no earlier set is known (the store is unreachable at start).
	OnUnknown func(error)
}

type snapshot struct {
	all    []*UsageLimit
	active []*UsageLimit
	at     time.Time
	// version is the notifier's version the set was read at.
	version string
	// unknown says the set could not be read and none was before: no
	// limit is known, so none is enforced until a read succeeds.
	unknown bool
}

// NewStore returns a store over kv.
func NewStore(kv kvstore.KV, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{kv: kv, now: now}
}

// SetNotifier makes writes announce themselves through n and wait for the
// other instances to reload (Notifier.Announce), and lets Active check a
// stale set against n's version instead of reading it again.
func (s *Store) SetNotifier(n Notifier) { s.notice = n }

// Active implements Source: the active limits, checked again when older
// than refreshEvery. Every request arriving while one checks waits for
// that check rather than be served a set that may lack a new limit.
//
// When the set cannot be read and no earlier set is known (the store was
// unreachable when the gateway started), no limit is known: Active
// answers no limit, and no error, so requests that no limit can be known
// to apply to do not need the store; it reads again every refreshEvery.
// When a read fails after a set was known, that set goes on being served.
func (s *Store) Active(ctx context.Context) ([]*UsageLimit, error) {
	snap := s.snap.Load()
	if snap != nil && s.now().Sub(snap.at) < refreshEvery {
		return snap.active, nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if cur := s.snap.Load(); cur != nil && s.now().Sub(cur.at) < refreshEvery {
		return cur.active, nil // checked while this caller waited
	}
	snap = s.snap.Load()
	if snap != nil && !snap.unknown && s.notice != nil {
		if v, err := s.notice.Version(ctx); err == nil && v == snap.version {
			next := *snap
			next.at = s.now()
			s.snap.Store(&next)
			return next.active, nil
		}
	}
	next, err := s.load(ctx)
	if err == nil {
		return next.active, nil
	}
	if ctx.Err() != nil && snap != nil {
		return snap.active, nil
	}
	failed := &snapshot{at: s.now(), unknown: true}
	if snap != nil && !snap.unknown {
		c := *snap
		c.at = s.now()
		failed = &c
	} else if s.OnUnknown != nil {
		s.OnUnknown(err)
	}
	s.snap.Store(failed)
	return failed.active, nil
}

// load reads every limit from the KV.
func (s *Store) load(ctx context.Context) (*snapshot, error) {
	next := &snapshot{at: s.now()}
	if s.notice != nil {
		// Read before the limits, so a write landing meanwhile makes the
		// next check read again rather than be missed.
		v, err := s.notice.Version(ctx)
		if err != nil {
			return nil, err
		}
		next.version = v
	}
	keys, err := kvstore.ListKeys(ctx, s.kv, strings.TrimSuffix(storePrefix, "/"), false)
	if err != nil {
		return nil, err
	}
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

// invalidate makes the next Active check the set again, keeping the
// current one for when that check fails.
func (s *Store) invalidate() {
	if snap := s.snap.Load(); snap != nil {
		c := *snap
		c.at, c.version = time.Time{}, "\x00stale"
		s.snap.Store(&c)
	}
}

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
	if err := s.kv.Store(ctx, storePrefix+u.ID, b); err != nil {
		return err
	}
	return s.announce(ctx)
}

// announce tells the other instances of a write and waits until they
// enforce it (Notifier.Announce); this instance's next Active reads the
// set again.
func (s *Store) announce(ctx context.Context) error {
	s.invalidate()
	if s.notice == nil {
		return nil
	}
	return s.notice.Announce(ctx)
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
	if err := s.kv.Delete(ctx, storePrefix+id); err != nil {
		return err
	}
	return s.announce(ctx)
}
