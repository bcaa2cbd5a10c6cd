package keys

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestSameSlugCreatedOnce: two instances creating a virtual key of the
// same slug in one workspace at the same moment: exactly one is stored
// and the other is ErrConflict, every time, on Redis and on a shared
// file storage. Each instance's own memory would pass both (neither has
// seen the other's record yet); the claim in the store decides.
func TestSameSlugCreatedOnce(t *testing.T) {
	for _, backend := range []string{"redis", "file"} {
		t.Run(backend, func(t *testing.T) {
			a, b := instancePair(t, backend)
			ctx := context.Background()
			for i := range pairs[backend] {
				slug := fmt.Sprintf("vk-%d", i)
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for j, s := range []*Store{a, b} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[j] = s.CreateVirtualKey(ctx, &VirtualKey{Slug: slug, WorkspaceID: "ws"}, providers.Settings{Provider: "openai"})
					}()
				}
				wg.Wait()
				ok, conflicts := 0, 0
				for _, err := range errs {
					switch {
					case err == nil:
						ok++
					case errors.Is(err, ErrConflict):
						conflicts++
					default:
						t.Fatalf("round %d: %v", i, err)
					}
				}
				if ok != 1 || conflicts != 1 {
					t.Fatalf("round %d: %d created, %d conflicts; want exactly one of each", i, ok, conflicts)
				}
			}
		})
	}
}

// TestSlugClaimLifecycle: a deleted virtual key's slug is free again at
// once; a claim left without its record is taken over only once it is
// older than claimStale (never a create still between its claim and its
// record).
func TestSlugClaimLifecycle(t *testing.T) {
	kv, _ := fileKV(t)
	c := &clock{t: time.Now()}
	s := newTestStore(t, kv, c)
	ctx := context.Background()
	st := providers.Settings{Provider: "openai"}
	vk := &VirtualKey{Slug: "v", WorkspaceID: "ws"}
	if err := s.CreateVirtualKey(ctx, vk, st); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVirtualKey(ctx, vk.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVirtualKey(ctx, &VirtualKey{Slug: "v", WorkspaceID: "ws"}, st); err != nil {
		t.Fatalf("recreating a deleted slug: %v", err)
	}
	// A claim whose record never came (a create that failed after it).
	orphan := NewID()
	if err := kv.Store(ctx, s.slugKey(kindVirtualKeys, "ws", "w"), []byte(orphan)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVirtualKey(ctx, &VirtualKey{Slug: "w", WorkspaceID: "ws"}, st); !errors.Is(err, ErrConflict) {
		t.Fatalf("a young claim was taken over: %v", err)
	}
	c.t = c.t.Add(2 * claimStale)
	if err := s.CreateVirtualKey(ctx, &VirtualKey{Slug: "w", WorkspaceID: "ws"}, st); err != nil {
		t.Fatalf("a stale claim was not taken over: %v", err)
	}
	if err := s.CreateVirtualKey(ctx, &VirtualKey{Slug: "w", WorkspaceID: "other-ws"}, st); err != nil {
		t.Fatalf("the slug in another workspace: %v", err)
	}
}

// TestPreconditionAcrossInstances: a write on condition of the version
// one instance read is refused (ErrPrecondition, nothing stored) when
// another instance wrote the record since, although the first instance's
// memory may not have seen that write yet; a delete too.
func TestPreconditionAcrossInstances(t *testing.T) {
	for _, backend := range []string{"redis", "file"} {
		t.Run(backend, func(t *testing.T) {
			a, b := instancePair(t, backend)
			ctx := context.Background()
			at := func(v int64) Precondition { return func(got int64) bool { return got == v } }
			key := &APIKey{Name: "k"}
			if _, err := a.CreateAPIKey(ctx, key); err != nil {
				t.Fatal(err)
			}
			vk := &VirtualKey{Slug: "v", WorkspaceID: "ws"}
			if err := a.CreateVirtualKey(ctx, vk, providers.Settings{Provider: "openai"}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.UpdateAPIKey(ctx, key.ID, func(r *APIKey) error { r.Description = "b"; return nil }); err != nil {
				t.Fatal(err)
			}
			if _, err := b.UpdateVirtualKey(ctx, vk.ID, func(r *VirtualKey, _ *providers.Settings) error { r.Note = "b"; return nil }); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name string
				err  error
			}{
				{"update", func() error {
					_, err := a.UpdateAPIKey(ctx, key.ID, func(r *APIKey) error { r.Description = "a"; return nil }, at(1))
					return err
				}()},
				{"revoke", func() error { _, err := a.RevokeAPIKey(ctx, key.ID, at(1)); return err }()},
				{"rotate", func() error { _, _, _, err := a.RotateAPIKey(ctx, key.ID, "", time.Hour, at(1)); return err }()},
				{"virtual key update", func() error {
					_, err := a.UpdateVirtualKey(ctx, vk.ID, func(r *VirtualKey, _ *providers.Settings) error { return nil }, at(1))
					return err
				}()},
				{"virtual key rotate", func() error { _, _, err := a.RotateVirtualKey(ctx, vk.ID, "", "sk-x", at(1)); return err }()},
				{"virtual key delete", a.DeleteVirtualKey(ctx, vk.ID, at(1))},
			}
			for _, s := range steps {
				if !errors.Is(s.err, ErrPrecondition) {
					t.Errorf("%s at a past version: %v, want ErrPrecondition", s.name, s.err)
				}
			}
			r := new(APIKey)
			if _, err := b.loadRecord(ctx, kindAPIKeys, key.ID, r); err != nil || r.Version != 2 || r.Status != StatusActive {
				t.Fatalf("stored key after refused writes: version %d status %s (%v)", r.Version, r.Status, err)
			}
			if err := a.DeleteVirtualKey(ctx, vk.ID, at(2)); err != nil {
				t.Fatalf("delete at the current version: %v", err)
			}
		})
	}
}
