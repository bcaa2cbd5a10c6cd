package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/logthrottle"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Options configure a Store.
type Options struct {
	// KV keeps the records: Caddy's storage, or kvstore.Redis.
	KV kvstore.KV
	// Redis, when set, is the Redis KV lives in: changes are announced on
	// a pub/sub channel and the change counter is an INCR, so every
	// instance applies a change as soon as it is published.
	Redis redis.UniversalClient
	// Prefix is where records live in KV (default "llm_gateway/keys").
	Prefix string
	// Hasher digests gateway keys. Without one, Secret gives the server
	// secret when the store is initialised (Init), which may need the KV.
	Hasher *Hasher
	// Secret returns the server secret (see LoadOrCreateSecret).
	Secret func(context.Context) ([]byte, error)
	// Sealer encrypts provider credentials; nil refuses API virtual keys.
	Sealer *Sealer
	// Poll is how often the change counter is read, the bound on how long
	// a missed announcement goes unseen (default 1s).
	Poll time.Duration
	// Logger receives store failures (never a secret).
	Logger *zap.Logger
	// Now replaces time.Now in tests.
	Now func() time.Time
}

// Record kinds, the folders of the store.
const (
	kindAPIKeys     = "api_keys"
	kindVirtualKeys = "virtual_keys"
	kindConfigs     = "configs"
)

// Store holds the API's records in a KV and serves them from memory. The
// request path (Lookup, VirtualKey, Config) takes a read lock and does no
// I/O; writes go to the KV first, then to memory, then are announced.
type Store struct {
	opts    Options
	prefix  string
	writeMu sync.Mutex // serialises this instance's writes

	mu      sync.RWMutex
	idx     *index
	applied atomic.Int64 // the change counter the index reflects
	hasher  atomic.Pointer[Hasher]
	ready   atomic.Bool

	stop chan struct{}
	done chan struct{}
	// downLog and pollLog hold back the sync loop's repeated warnings
	// while the record store stays away: one line per logEvery with the
	// count held back, not one per poll tick.
	downLog, pollLog logthrottle.Throttle
}

// index is every record in memory. Records in it are never modified: a
// change replaces the pointer.
type index struct {
	byDigest map[Digest]*entry
	apiKeys  map[string]*APIKey
	order    []keyRef // api keys by id (UUIDv7: creation order)
	// scoped is order cut by scope (list.go): an organisation's keys
	// ({org, ""}) and one workspace's ({org, ws}), so a list page is
	// found by a binary search in its scope, not a scan of every key.
	scoped map[scope][]keyRef
	// wsOrgs counts the records (API keys, virtual keys, configs) each
	// organisation holds in each workspace: the tenancy rule's "whose
	// workspace is this" is one map read (ForeignOrganisation).
	wsOrgs   map[string]map[string]int
	vks      map[string]*vkEntry
	vkSlug   map[wsName]*vkEntry
	configs  map[string]*Config
	cfgSlug  map[wsName]*cfgEntry
	users    users                // the identity provider's users (users.go)
	cfgAlias map[wsName]*cfgEntry // by model alias (configs.go)
}

// wsName is a name within one workspace.
type wsName struct{ ws, name string }

type entry struct {
	rec    *APIKey
	caller *identity.Caller // CallerOf(rec), built once per record change
	prev   bool
}

type vkEntry struct {
	rec      *VirtualKey
	settings *providers.Settings // decrypted; nil when it does not open
}

type cfgEntry struct {
	rec    *Config // as stored: credentials masked
	routed *Config // latest version opened; nil when it does not open
}

func newIndex() *index {
	return &index{
		byDigest: map[Digest]*entry{}, apiKeys: map[string]*APIKey{},
		vks: map[string]*vkEntry{}, vkSlug: map[wsName]*vkEntry{},
		configs: map[string]*Config{}, cfgSlug: map[wsName]*cfgEntry{}, cfgAlias: map[wsName]*cfgEntry{},
		scoped: map[scope][]keyRef{}, wsOrgs: map[string]map[string]int{},
	}
}

// New returns a store over opts.KV. Call Load to read the records and
// Start to follow other instances' changes.
func New(opts Options) (*Store, error) {
	if opts.KV == nil || (opts.Hasher == nil && opts.Secret == nil) {
		return nil, errors.New("keys: a KV and a Hasher or Secret are required")
	}
	if opts.Prefix == "" {
		opts.Prefix = "llm_gateway/keys"
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{opts: opts, prefix: strings.TrimSuffix(opts.Prefix, "/"), idx: newIndex()}
	if opts.Hasher != nil {
		s.hasher.Store(opts.Hasher)
	}
	return s, nil
}

// ErrNotReady is the answer of writes before the store could be read
// (its KV, such as Redis, was unreachable).
var ErrNotReady = errors.New("keys: the record store is not available yet")

// Init reads the server secret (when not given) and every record. Until
// it succeeds, no API key authenticates and writes fail with ErrNotReady;
// Start keeps retrying it.
func (s *Store) Init(ctx context.Context) error {
	if s.hasher.Load() == nil {
		secret, err := s.opts.Secret(ctx)
		if err != nil {
			return fmt.Errorf("keys: loading the server secret: %w", err)
		}
		h, err := NewHasher(secret)
		if err != nil {
			return err
		}
		s.hasher.Store(h)
	}
	if err := s.Load(ctx); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

// Ready reports whether Init succeeded.
func (s *Store) Ready() bool { return s.ready.Load() }

// CanSeal reports whether API virtual keys can be stored (an encryption
// key is configured).
func (s *Store) CanSeal() bool { return s.opts.Sealer != nil }

// Hasher returns the store's key hasher (nil before Init).
func (s *Store) Hasher() *Hasher { return s.hasher.Load() }

func (s *Store) now() time.Time { return s.opts.Now().UTC() }

func (s *Store) recordKey(kind, id string) string { return s.prefix + "/" + kind + "/" + id + ".json" }

// Result is what Lookup found.
type Result int

// Lookup results.
const (
	Unknown Result = iota
	Valid
	Expired
	Revoked
	Disabled
	Exhausted
	RotatedOut
)

// Lookup finds the record of a presented key: O(1) whatever the number of
// keys, one HMAC and one map read. c is the record's caller (CallerOf),
// nil unless res is Valid.
func (s *Store) Lookup(key string) (c *identity.Caller, rec *APIKey, res Result) {
	h := s.hasher.Load()
	if h == nil || !IsKey(key) {
		return nil, nil, Unknown
	}
	d := h.Sum(key)
	s.mu.RLock()
	e := s.idx.byDigest[d]
	s.mu.RUnlock()
	if e == nil {
		return nil, nil, Unknown
	}
	now := s.opts.Now()
	switch {
	case e.prev && (e.rec.PrevUntil == nil || !now.Before(*e.rec.PrevUntil)):
		return nil, e.rec, RotatedOut
	case e.rec.Status == StatusRevoked:
		return nil, e.rec, Revoked
	case e.rec.Status == StatusDisabled:
		return nil, e.rec, Disabled
	case e.rec.Status == StatusExhausted:
		return nil, e.rec, Exhausted
	case IsExpired(e.rec.ExpiresAt, now):
		return nil, e.rec, Expired
	}
	return e.caller, e.rec, Valid
}

// Holder returns the caller of API key id and whether it may still be
// used: work that runs later as a key (a managed batch's lines) checks
// it again, by id, as a request checks the key it presents. A rotated
// key's id stays the same, so its batches outlive the rotation.
func (s *Store) Holder(id string) (c *identity.Caller, res Result) {
	s.mu.RLock()
	r := s.idx.apiKeys[id]
	var e *entry
	if r != nil {
		if d, err := ParseDigest(r.Digest); err == nil {
			e = s.idx.byDigest[d]
		}
	}
	s.mu.RUnlock()
	if e == nil || e.rec.ID != id {
		return nil, Unknown
	}
	now := s.opts.Now()
	switch {
	case e.rec.Status == StatusRevoked:
		return nil, Revoked
	case e.rec.Status == StatusDisabled:
		return nil, Disabled
	case e.rec.Status == StatusExhausted:
		return nil, Exhausted
	case IsExpired(e.rec.ExpiresAt, now):
		return nil, Expired
	}
	return e.caller, Valid
}

// APIKey returns the key record with id.
func (s *Store) APIKey(id string) (*APIKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.idx.apiKeys[id]
	return r, ok
}

// VirtualKey returns the decrypted settings of workspace's virtual key
// slug. A key that is not active, or expired, is not found.
func (s *Store) VirtualKey(workspace, slug string) (*providers.Settings, bool) {
	s.mu.RLock()
	e := s.idx.vkSlug[wsName{workspace, slug}]
	s.mu.RUnlock()
	if e == nil || e.settings == nil || e.rec.Status != StatusActive || IsExpired(e.rec.ExpiresAt, s.opts.Now()) {
		return nil, false
	}
	return e.settings, true
}

// VirtualKeyRecord returns the record of workspace's virtual key slug.
func (s *Store) VirtualKeyRecord(workspace, slug string) (*VirtualKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.idx.vkSlug[wsName{workspace, slug}]
	if e == nil {
		return nil, false
	}
	return e.rec, true
}

// VirtualKeys returns the virtual key records keep passes, oldest first.
func (s *Store) VirtualKeys(keep func(*VirtualKey) bool) []*VirtualKey {
	s.mu.RLock()
	var out []*VirtualKey
	for _, e := range s.idx.vks {
		if keep(e.rec) {
			out = append(out, e.rec)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *VirtualKey) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Config returns workspace's active config slug as routing uses it: its
// latest version's credentials opened. A config whose credentials do not
// open is not found. Every other accessor returns the record as stored,
// credentials masked.
func (s *Store) Config(workspace, slug string) (*Config, bool) {
	s.mu.RLock()
	e := s.idx.cfgSlug[wsName{workspace, slug}]
	s.mu.RUnlock()
	if e == nil || e.routed == nil || e.rec.Status != StatusActive {
		return nil, false
	}
	return e.routed, true
}

// ConfigRecord returns workspace's config slug whatever its status.
func (s *Store) ConfigRecord(workspace, slug string) (*Config, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.idx.cfgSlug[wsName{workspace, slug}]
	if e == nil {
		return nil, false
	}
	return e.rec, true
}

// ConfigByID returns the config record with id.
func (s *Store) ConfigByID(id string) (*Config, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := s.idx.configs[id]
	return c, c != nil
}

// Configs returns the config records keep passes, oldest first.
func (s *Store) Configs(keep func(*Config) bool) []*Config {
	s.mu.RLock()
	var out []*Config
	for _, c := range s.idx.configs {
		if keep(c) {
			out = append(out, c)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Config) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Load reads every record into a new index and puts it in service. A
// record that does not decode is skipped and logged, so one bad record
// does not lock every key out.
func (s *Store) Load(ctx context.Context) error {
	v, err := s.readVersion(ctx)
	if err != nil {
		return err
	}
	idx := newIndex()
	for _, kind := range []string{kindAPIKeys, kindVirtualKeys, kindConfigs, kindUsers} {
		if sc, ok := s.opts.KV.(kvstore.Scanner); ok {
			// One query for the folder (SQL records) instead of a
			// round trip per record.
			err := sc.Scan(ctx, s.prefix+"/"+kind, func(name string, data []byte) error {
				if !strings.HasSuffix(name, ".json") {
					return nil
				}
				if err := s.put(idx, kind, data, false); err != nil {
					s.opts.Logger.Error("skipping a record that does not decode", zap.String("kind", kind), zap.String("key", path.Base(name)), zap.Error(err))
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("keys: reading %s: %w", kind, err)
			}
			continue
		}
		names, err := kvstore.ListKeys(ctx, s.opts.KV, s.prefix+"/"+kind, false)
		if err != nil {
			return fmt.Errorf("keys: listing %s: %w", kind, err)
		}
		for _, name := range names {
			id, ok := strings.CutSuffix(path.Base(name), ".json")
			if !ok {
				continue
			}
			data, err := s.opts.KV.Load(ctx, name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("keys: loading %s %s: %w", kind, id, err)
			}
			if err := s.put(idx, kind, data, false); err != nil {
				s.opts.Logger.Error("skipping a record that does not decode", zap.String("kind", kind), zap.String("id", id), zap.Error(err))
			}
		}
	}
	idx.sortOrder()
	s.mu.Lock()
	s.idx = idx
	s.mu.Unlock()
	s.applied.Store(v)
	return nil
}

// put decodes a record of kind into idx, replacing its older version (a
// record older than the one indexed, such as this instance's own write
// applied after another instance's later one was, is ignored);
// sorted keeps the key order up to date (a single change), else the
// caller builds it once (sortOrder) after a full load.
func (s *Store) put(idx *index, kind string, data []byte, sorted bool) error {
	switch kind {
	case kindAPIKeys:
		r := new(APIKey)
		if err := json.Unmarshal(data, r); err != nil {
			return err
		}
		if old := idx.apiKeys[r.ID]; old != nil && old.Version > r.Version {
			return nil
		}
		return idx.putAPIKey(r, sorted)
	case kindVirtualKeys:
		r := new(VirtualKey)
		if err := json.Unmarshal(data, r); err != nil {
			return err
		}
		if old := idx.vks[r.ID]; old != nil && old.rec.Version > r.Version {
			return nil
		}
		idx.putVK(r, s.open(r))
	case kindConfigs:
		r := new(Config)
		if err := json.Unmarshal(data, r); err != nil {
			return err
		}
		if old := idx.configs[r.ID]; old != nil && old.Version > r.Version {
			return nil
		}
		idx.putConfig(r, s.openConfig(r))
	case kindUsers:
		r := new(User)
		if err := json.Unmarshal(data, r); err != nil {
			return err
		}
		if old := idx.users.byID[r.ID]; old != nil && old.Version > r.Version {
			return nil
		}
		idx.users.put(r)
	}
	return nil
}

// open decrypts a virtual key's credentials into its full settings; nil
// when they do not open (logged: the key is then unusable, not leaked).
func (s *Store) open(r *VirtualKey) *providers.Settings {
	full := r.Settings
	if r.Sealed == nil {
		return &full
	}
	if s.opts.Sealer == nil {
		s.opts.Logger.Error("virtual key is encrypted but no encryption_key is configured", zap.String("virtual_key", r.Slug))
		return nil
	}
	plain, _, err := s.opts.Sealer.Open(r.Sealed, []byte(r.ID))
	if err != nil {
		s.opts.Logger.Error("virtual key credentials do not open", zap.String("virtual_key", r.Slug), zap.Error(err))
		return nil
	}
	var sec secrets
	if err := json.Unmarshal(plain, &sec); err != nil {
		return nil
	}
	sec.apply(&full)
	return &full
}

// putAPIKey indexes r; sorted says whether order is kept up to date (a
// single change) or built once by sortOrder after a bulk change.
func (idx *index) putAPIKey(r *APIKey, sorted bool) error {
	c := CallerOf(r)
	d, err := ParseDigest(r.Digest)
	if err != nil {
		return err
	}
	old := idx.apiKeys[r.ID]
	idx.dropDigests(old)
	if old != nil {
		idx.holds(old.WorkspaceID, old.OrganisationID, -1)
	}
	idx.holds(r.WorkspaceID, r.OrganisationID, 1)
	idx.apiKeys[r.ID] = r
	idx.byDigest[d] = &entry{rec: r, caller: c}
	if pd, err := ParseDigest(r.PrevDigest); err == nil {
		idx.byDigest[pd] = &entry{rec: r, caller: c, prev: true}
	}
	if !sorted {
		return nil // sortOrder follows
	}
	ref := keyRef{id: r.ID, lname: strings.ToLower(r.Name), rec: r}
	idx.order = putRef(idx.order, ref)
	if old != nil {
		idx.unscope(old)
	}
	for _, k := range scopesOf(r) {
		idx.scoped[k] = putRef(idx.scoped[k], ref)
	}
	return nil
}

func (idx *index) dropDigests(old *APIKey) {
	if old == nil {
		return
	}
	for _, s := range []string{old.Digest, old.PrevDigest} {
		if d, err := ParseDigest(s); err == nil {
			if e := idx.byDigest[d]; e != nil && e.rec.ID == old.ID {
				delete(idx.byDigest, d)
			}
		}
	}
}

func (idx *index) dropAPIKey(id string) {
	old := idx.apiKeys[id]
	if old == nil {
		return
	}
	idx.dropDigests(old)
	idx.holds(old.WorkspaceID, old.OrganisationID, -1)
	delete(idx.apiKeys, id)
	idx.order = dropRef(idx.order, id)
	idx.unscope(old)
}

func (idx *index) putVK(r *VirtualKey, settings *providers.Settings) {
	idx.dropVK(r.ID)
	e := &vkEntry{rec: r, settings: settings}
	idx.holds(r.WorkspaceID, r.OrganisationID, 1)
	idx.vks[r.ID] = e
	idx.vkSlug[wsName{r.WorkspaceID, r.Slug}] = e
}

func (idx *index) dropVK(id string) {
	if old := idx.vks[id]; old != nil {
		idx.holds(old.rec.WorkspaceID, old.rec.OrganisationID, -1)
		delete(idx.vkSlug, wsName{old.rec.WorkspaceID, old.rec.Slug})
		delete(idx.vks, id)
	}
}

func (idx *index) putConfig(r, routed *Config) {
	idx.dropConfig(r.ID)
	idx.holds(r.WorkspaceID, r.OrganisationID, 1)
	idx.configs[r.ID] = r
	e := &cfgEntry{rec: r, routed: routed}
	idx.cfgSlug[wsName{r.WorkspaceID, r.Slug}] = e
	idx.putAliases(e)
}

func (idx *index) dropConfig(id string) {
	if old := idx.configs[id]; old != nil {
		idx.holds(old.WorkspaceID, old.OrganisationID, -1)
		delete(idx.cfgSlug, wsName{old.WorkspaceID, old.Slug})
		delete(idx.configs, id)
		idx.dropAliases(old)
	}
}

// swap stores rec in place of old, the stored bytes it was read from
// (nil: a new record), and announces it; then applies it here, so this
// instance reads its own write at once. The swap is atomic across every
// instance sharing the KV (kvstore.CompareAndSwap): when another write
// landed since old was read, nothing is stored and the answer is
// ErrVersionConflict. writeMu only spares this instance's own writes
// that conflict.
func (s *Store) swap(ctx context.Context, kind, id string, old []byte, rec any) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ok, err := kvstore.CompareAndSwap(ctx, s.opts.KV, s.recordKey(kind, id), old, data)
	if err != nil {
		return fmt.Errorf("keys: storing %s %s: %w", kind, id, err)
	}
	if !ok {
		return ErrVersionConflict
	}
	s.mu.Lock()
	err = s.put(s.idx, kind, data, true)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.announce(ctx, kind, id)
	return nil
}

// remove deletes a record and announces it.
func (s *Store) remove(ctx context.Context, kind, id string) error {
	return s.removeIf(ctx, kind, id, nil)
}

// removeIf is remove; with old (the stored bytes it was read from) only
// while the record is still those (else ErrPrecondition: it changed).
func (s *Store) removeIf(ctx context.Context, kind, id string, old []byte) error {
	if old != nil {
		ok, err := kvstore.CompareAndDelete(ctx, s.opts.KV, s.recordKey(kind, id), old)
		if err != nil {
			return fmt.Errorf("keys: deleting %s %s: %w", kind, id, err)
		}
		if !ok {
			return ErrPrecondition
		}
	} else if err := s.opts.KV.Delete(ctx, s.recordKey(kind, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keys: deleting %s %s: %w", kind, id, err)
	}
	s.mu.Lock()
	s.idx.drop(kind, id)
	s.mu.Unlock()
	s.announce(ctx, kind, id)
	return nil
}

func (idx *index) drop(kind, id string) {
	switch kind {
	case kindAPIKeys:
		idx.dropAPIKey(id)
	case kindVirtualKeys:
		idx.dropVK(id)
	case kindConfigs:
		idx.dropConfig(id)
	case kindUsers:
		idx.users.drop(id)
	}
}
