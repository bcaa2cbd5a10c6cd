package keys

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// instancePair is two stores over one backend, as two gateway instances
// run them: one Redis (a prefix of its own, two clients) or one file
// storage folder.
func instancePair(t *testing.T, backend string) (a, b *Store) {
	t.Helper()
	switch backend {
	case "redis":
		prefix := "llmgw:test:cas:" + uuid.NewString() + ":llm_gateway/keys"
		c1, c2 := redistest.Client(t, 0), redistest.Client(t, 0)
		t.Cleanup(func() {
			ctx := context.Background()
			for it := c1.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
				c1.Del(ctx, it.Val())
			}
		})
		mk := func(c any) *Store {
			kv := kvstore.NewRedis(c1, 0)
			if c == c2 {
				kv = kvstore.NewRedis(c2, 0)
			}
			return newStoreWith(t, kv, func(o *Options) { o.Prefix = prefix; setRedis(o, c) })
		}
		return mk(c1), mk(c2)
	default:
		dir := t.TempDir()
		return newTestStore(t, &certmagic.FileStorage{Path: dir}, nil), newTestStore(t, &certmagic.FileStorage{Path: dir}, nil)
	}
}

// newStoreWith is newTestStore with options changed by edit.
func newStoreWith(t *testing.T, kv kvstore.KV, edit func(*Options)) *Store {
	t.Helper()
	h, _ := NewHasher(testSecret)
	sealer, _ := NewSealer([]byte("kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"))
	opts := Options{KV: kv, Hasher: h, Sealer: sealer}
	edit(&opts)
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// pairs is how many revoke-against-edit races each backend runs (file
// locks poll every second when contended, so fewer there).
var pairs = map[string]int{"redis": 30, "file": 6}

// TestRevokeRacingEditNeverResurrects: a revocation on one instance and an
// edit of the same key on another at the same moment: whichever lands
// second starts from what the first stored (the revocation is applied to
// the edited key) or is refused (the edit of a revoked key), so a key
// whose revocation was answered is revoked in the store, and on both
// instances, every time. Before records were swapped on their version,
// the edit stored over the revocation 4-7 times in 30.
func TestRevokeRacingEditNeverResurrects(t *testing.T) {
	for _, backend := range []string{"redis", "file"} {
		t.Run(backend, func(t *testing.T) {
			a, b := instancePair(t, backend)
			ctx := context.Background()
			resurrected, editsRefused := 0, 0
			for i := range pairs[backend] {
				key, err := a.CreateAPIKey(ctx, &APIKey{Name: "k"})
				if err != nil {
					t.Fatal(err)
				}
				_, rec, _ := a.Lookup(key)
				start := make(chan struct{})
				var wg sync.WaitGroup
				var revokeErr, editErr error
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					_, revokeErr = a.RevokeAPIKey(ctx, rec.ID)
				}()
				go func() {
					defer wg.Done()
					<-start
					_, editErr = b.UpdateAPIKey(ctx, rec.ID, func(r *APIKey) error {
						if r.Status == StatusRevoked {
							return errRevokedForTest
						}
						r.Name = "edited"
						return nil
					})
				}()
				close(start)
				wg.Wait()
				if revokeErr != nil {
					t.Fatalf("pair %d: revoke: %v", i, revokeErr)
				}
				switch {
				case editErr == nil:
				case errors.Is(editErr, ErrVersionConflict), errors.Is(editErr, errRevokedForTest):
					editsRefused++
				default:
					t.Fatalf("pair %d: edit: %v", i, editErr)
				}
				stored := new(APIKey)
				if _, err := a.loadRecord(ctx, kindAPIKeys, rec.ID, stored); err != nil {
					t.Fatal(err)
				}
				if stored.Status != StatusRevoked {
					resurrected++
				}
				if _, _, res := a.Lookup(key); res != Revoked {
					t.Errorf("pair %d: the revoking instance answers %v", i, res)
				}
			}
			if resurrected > 0 {
				t.Fatalf("%d of %d answered revocations were undone by a concurrent edit", resurrected, pairs[backend])
			}
			t.Logf("%d pairs: 0 resurrections, %d edits refused", pairs[backend], editsRefused)
		})
	}
}

var errRevokedForTest = errors.New("revoked")

// TestConcurrentEditsConflict: two edits started from one version on two
// instances: one is stored, the other fails with ErrVersionConflict
// instead of writing over it, and the version counts every stored write.
func TestConcurrentEditsConflict(t *testing.T) {
	for _, backend := range []string{"redis", "file"} {
		t.Run(backend, func(t *testing.T) {
			a, b := instancePair(t, backend)
			ctx := context.Background()
			key, _ := a.CreateAPIKey(ctx, &APIKey{Name: "k"})
			_, rec, _ := a.Lookup(key)
			if rec.Version != 1 {
				t.Fatalf("a new record has version %d", rec.Version)
			}
			// a's edit reads, then b's whole edit lands, then a's tries to store.
			_, err := a.UpdateAPIKey(ctx, rec.ID, func(r *APIKey) error {
				r.Name = "from-a"
				if _, err := b.UpdateAPIKey(ctx, rec.ID, func(r *APIKey) error { r.Description = "from-b"; return nil }); err != nil {
					t.Fatal(err)
				}
				return nil
			})
			if !errors.Is(err, ErrVersionConflict) {
				t.Fatalf("an edit from a stale version: %v, want ErrVersionConflict", err)
			}
			stored := new(APIKey)
			if _, err := b.loadRecord(ctx, kindAPIKeys, rec.ID, stored); err != nil {
				t.Fatal(err)
			}
			if stored.Name != "k" || stored.Description != "from-b" || stored.Version != 2 {
				t.Fatalf("stored %q %q version %d; want b's edit alone at version 2", stored.Name, stored.Description, stored.Version)
			}
			// A revocation from a stale version is applied again, never lost.
			r, err := a.RevokeAPIKey(ctx, rec.ID)
			if err != nil || r.Status != StatusRevoked || r.Version != 3 {
				t.Fatalf("revoke: %v %+v", err, r)
			}
		})
	}
}

// TestIdempotentRotateAcrossInstances: one Idempotency-Key sent to two
// instances at once rotates once; both answer the same key, which works,
// and a second call with other parameters is refused.
func TestIdempotentRotateAcrossInstances(t *testing.T) {
	for _, backend := range []string{"redis", "file"} {
		t.Run(backend, func(t *testing.T) {
			a, b := instancePair(t, backend)
			ctx := context.Background()
			for i := range pairs[backend] / 2 {
				old, _ := a.CreateAPIKey(ctx, &APIKey{Name: "k"})
				_, rec, _ := a.Lookup(old)
				idem := uuid.NewString()
				start := make(chan struct{})
				var wg sync.WaitGroup
				var got [2]string
				var replayed [2]bool
				var errs [2]error
				for j, s := range []*Store{a, b} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						got[j], _, replayed[j], errs[j] = s.RotateAPIKey(ctx, rec.ID, idem, time.Hour)
					}()
				}
				close(start)
				wg.Wait()
				if errs[0] != nil || errs[1] != nil {
					t.Fatalf("pair %d: %v / %v", i, errs[0], errs[1])
				}
				if got[0] != got[1] || replayed[0] == replayed[1] {
					t.Fatalf("pair %d: two rotations (same key %v, replayed %v)", i, got[0] == got[1], replayed)
				}
				stored := new(APIKey)
				if _, err := a.loadRecord(ctx, kindAPIKeys, rec.ID, stored); err != nil {
					t.Fatal(err)
				}
				if stored.Version != 2 || stored.Digest != a.Hasher().Sum(got[0]).String() {
					t.Fatalf("pair %d: the answered key is not the stored one (version %d)", i, stored.Version)
				}
				if _, _, _, err := b.RotateAPIKey(ctx, rec.ID, idem, time.Minute); !errors.Is(err, ErrIdempotencyMismatch) {
					t.Fatalf("pair %d: the same Idempotency-Key with another grace: %v", i, err)
				}
			}
		})
	}
}
