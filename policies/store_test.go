package policies

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
)

// storeKind builds stores over one shared backend: calling make twice gives
// two "instances" that see each other's writes (memory has one instance).
type storeKind struct {
	name   string
	shared bool
	make   func(cfg StoreConfig) CachedStore
}

func storeKinds(t *testing.T) []storeKind {
	dir := t.TempDir()
	return []storeKind{
		{"memory", false, func(cfg StoreConfig) CachedStore { return NewMemoryStore(cfg) }},
		{"storage", true, func(cfg StoreConfig) CachedStore {
			return NewStorageStore(&certmagic.FileStorage{Path: dir}, cfg)
		}},
		{"redis", true, nil}, // made lazily: it needs Redis
	}
}

func makeStore(t *testing.T, k storeKind, cfg StoreConfig, ns *string) CachedStore {
	t.Helper()
	if k.name != "redis" {
		return k.make(cfg)
	}
	c := newRedisClient(t)
	if *ns == "" {
		*ns = testPrefix(t, c) + "policies"
	}
	cfg.Namespace = *ns
	return NewRedisStore(c, cfg)
}

func newBody(ws string) *Policy {
	p := validBody()
	p.WorkspaceID, p.OrganisationID = ws, testOrg
	return p
}

func TestStores(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			var ns string
			cfg := StoreConfig{Now: clock.Now, CacheTTL: 5 * time.Second}
			s := makeStore(t, k, cfg, &ns)

			// Create fills the server-set fields in place.
			p := newBody("ws-a")
			p.Name = strp("per key")
			if err := s.Create(ctx, p); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if !validUUID(p.ID) || p.Status != StatusActive || !p.CreatedAt.Equal(t0) || !p.LastUpdatedAt.Equal(t0) {
				t.Fatalf("Create did not fill id/status/timestamps: %+v", p)
			}
			got, err := s.Get(ctx, p.ID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.Object != ObjectRateLimits || got.ID != p.ID || *got.Name != "per key" ||
				got.Conditions[0] != p.Conditions[0] || !got.CreatedAt.Equal(t0) || got.Value != 100 {
				t.Fatalf("Get returned %+v", got)
			}
			got.Conditions[0].Value = "mutated" // callers own what Get returns
			if again, _ := s.Get(ctx, p.ID); again.Conditions[0].Value == "mutated" {
				t.Fatal("Get shares the stored record")
			}

			// Create refuses taken ids and invalid records.
			dup := newBody("ws-a")
			dup.ID = p.ID
			if err := s.Create(ctx, dup); !errors.Is(err, ErrExists) {
				t.Fatalf("Create with a taken id: %v, want ErrExists", err)
			}
			bad := newBody("ws-a")
			bad.GroupBy = nil
			var fe *FieldError
			if err := s.Create(ctx, bad); !errors.As(err, &fe) || fe.Field != "group_by" {
				t.Fatalf("Create of an invalid record: %v, want a group_by FieldError", err)
			}

			// Not found, including ids that are not UUIDs.
			for _, id := range []string{"0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f", "../../etc/passwd", ""} {
				if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get(%q): %v, want ErrNotFound", id, err)
				}
			}

			// List by workspace, oldest first.
			clock.Advance(time.Second)
			p2 := newBody("ws-b")
			if err := s.Create(ctx, p2); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
			p3 := newBody("ws-a")
			if err := s.Create(ctx, p3); err != nil {
				t.Fatal(err)
			}
			all, err := s.List(ctx, "")
			if err != nil || len(all) != 3 || all[0].ID != p.ID || all[1].ID != p2.ID || all[2].ID != p3.ID {
				t.Fatalf("List all: %v, %v", ids(all), err)
			}
			wsA, err := s.List(ctx, "ws-a")
			if err != nil || len(wsA) != 2 || wsA[0].ID != p.ID || wsA[1].ID != p3.ID || wsA[0].Object != ObjectRateLimits {
				t.Fatalf("List ws-a: %v, %v", ids(wsA), err)
			}
			if none, err := s.List(ctx, "ws-none"); err != nil || len(none) != 0 {
				t.Fatalf("List of an empty workspace: %v, %v", ids(none), err)
			}

			// Active reflects this instance's writes at once.
			act, err := s.Active(ctx)
			if err != nil || len(act) != 3 {
				t.Fatalf("Active: %v, %v", ids(act), err)
			}
			clock.Advance(time.Second)
			arch, _ := s.Get(ctx, p2.ID)
			arch.Status = StatusArchived
			if err := s.Put(ctx, arch); err != nil {
				t.Fatalf("Put: %v", err)
			}
			if !arch.CreatedAt.Equal(t0.Add(time.Second)) || !arch.LastUpdatedAt.Equal(t0.Add(3*time.Second)) {
				t.Fatalf("Put timestamps: created %v updated %v", arch.CreatedAt, arch.LastUpdatedAt)
			}
			act, err = s.Active(ctx)
			if err != nil || len(act) != 2 || act[0].ID != p.ID || act[1].ID != p3.ID {
				t.Fatalf("Active after archiving: %v, %v", ids(act), err)
			}
			if g, _ := s.Get(ctx, p2.ID); g.Status != StatusArchived {
				t.Fatalf("archived policy reads back as %q", g.Status)
			}
			badPut := arch.Clone()
			badPut.Unit = "rps"
			if err := s.Put(ctx, badPut); !errors.As(err, &fe) || fe.Field != "unit" {
				t.Fatalf("Put of an invalid record: %v", err)
			}

			// The cached path allocates nothing.
			if n := testing.AllocsPerRun(100, func() { _, _ = s.Active(ctx) }); n != 0 {
				t.Fatalf("Active allocates %.1f times on the cached path", n)
			}

			if !k.shared {
				return
			}
			// Another instance's write is seen once the TTL has passed.
			other := makeStore(t, k, cfg, &ns)
			p4 := newBody("ws-c")
			if err := other.Create(ctx, p4); err != nil {
				t.Fatal(err)
			}
			if act, _ = s.Active(ctx); len(act) != 2 {
				t.Fatalf("another instance's write was seen before the TTL: %v", ids(act))
			}
			clock.Advance(5 * time.Second)
			if act, _ = s.Active(ctx); len(act) != 3 || act[2].ID != p4.ID {
				t.Fatalf("another instance's write not seen after the TTL: %v", ids(act))
			}
			if got, err := other.Get(ctx, p.ID); err != nil || got.ID != p.ID {
				t.Fatalf("second instance cannot read the first's record: %v", err)
			}
		})
	}
}

func ids(ps []*Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// flakyStorage fails List on demand, to play a storage outage.
type flakyStorage struct {
	*certmagic.FileStorage
	fail  atomic.Bool
	lists atomic.Int64
}

func (f *flakyStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	f.lists.Add(1)
	if f.fail.Load() {
		return nil, errors.New("storage down")
	}
	return f.FileStorage.List(ctx, prefix, recursive)
}

func TestStorageStoreActiveSurvivesOutage(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	fs := &flakyStorage{FileStorage: &certmagic.FileStorage{Path: t.TempDir()}}
	var reported atomic.Int64
	s := NewStorageStore(fs, StoreConfig{Now: clock.Now, OnRefreshError: func(error) { reported.Add(1) }})

	// First load of an empty storage (the prefix does not exist yet).
	if act, err := s.Active(ctx); err != nil || len(act) != 0 {
		t.Fatalf("Active on empty storage: %v, %v", act, err)
	}
	if err := s.Create(ctx, newBody("ws")); err != nil {
		t.Fatal(err)
	}
	if act, err := s.Active(ctx); err != nil || len(act) != 1 {
		t.Fatalf("Active: %v, %v", ids(act), err)
	}

	fs.fail.Store(true)
	clock.Advance(6 * time.Second)
	before := fs.lists.Load()
	for i := 0; i < 10; i++ {
		act, err := s.Active(ctx)
		if err != nil || len(act) != 1 {
			t.Fatalf("Active during an outage: %v, %v", ids(act), err)
		}
	}
	if n := fs.lists.Load() - before; n != 1 {
		t.Fatalf("storage was asked %d times during one TTL of outage, want 1", n)
	}
	if reported.Load() != 1 {
		t.Fatalf("OnRefreshError called %d times, want 1", reported.Load())
	}

	// With nothing cached, the error reaches the caller.
	cold := NewStorageStore(fs, StoreConfig{Now: clock.Now})
	if _, err := cold.Active(ctx); err == nil {
		t.Fatal("Active with no cache and storage down returned no error")
	}

	fs.fail.Store(false)
	clock.Advance(6 * time.Second)
	if act, err := s.Active(ctx); err != nil || len(act) != 1 {
		t.Fatalf("Active after recovery: %v, %v", ids(act), err)
	}
}

func TestStorageStoreKeysAndForeignFiles(t *testing.T) {
	ctx := context.Background()
	st := &certmagic.FileStorage{Path: t.TempDir()}
	s := NewStorageStore(st, StoreConfig{})
	p := newBody("ws")
	if err := s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if !st.Exists(ctx, "llm_gateway/policies/"+p.ID+".json") {
		t.Fatal("record not stored under llm_gateway/policies/<id>.json")
	}
	// Files that are not records are ignored; broken records fail loudly.
	_ = st.Store(ctx, "llm_gateway/policies/README.txt", []byte("hi"))
	if all, err := s.List(ctx, ""); err != nil || len(all) != 1 {
		t.Fatalf("List with a foreign file: %v, %v", ids(all), err)
	}
	_ = st.Store(ctx, "llm_gateway/policies/0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f.json", []byte("{"))
	if _, err := s.List(ctx, ""); err == nil {
		t.Fatal("List with a broken record returned no error")
	}
}

func TestActiveConcurrent(t *testing.T) {
	ctx := context.Background()
	s := NewStorageStore(&certmagic.FileStorage{Path: t.TempDir()}, StoreConfig{CacheTTL: time.Millisecond})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if g == 0 && i%10 == 0 {
					p := newBody("ws-" + strconv.Itoa(i))
					if err := s.Create(ctx, p); err != nil {
						t.Error(err)
					}
				}
				if _, err := s.Active(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if act, err := s.Active(ctx); err != nil || len(act) != 5 {
		t.Fatalf("Active after concurrent writes: %d policies, %v", len(act), err)
	}
}
