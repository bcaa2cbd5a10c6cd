package keys

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestForeignOrganisation: the workspace→organisation counts follow every
// write of every kind (create, update, revoke, delete), on the instance
// that wrote and on one that loads the records, and answer the
// organisation other than the caller's that holds the workspace.
func TestForeignOrganisation(t *testing.T) {
	a, b := instancePair(t, "file")
	ctx := context.Background()
	key := &APIKey{Name: "k", OrganisationID: "org-a", WorkspaceID: "ws1"}
	vk := &VirtualKey{Slug: "v", OrganisationID: "org-b", WorkspaceID: "ws2"}
	cfg := &Config{Slug: "c", OrganisationID: "org-c", WorkspaceID: "ws3"}
	type want struct{ ws, own, org string }
	steps := []struct {
		name string
		do   func() error
		want []want
	}{
		{"empty", func() error { return nil }, []want{{"ws1", "org-z", ""}}},
		{"api key", func() error { _, err := a.CreateAPIKey(ctx, key); return err },
			[]want{{"ws1", "org-z", "org-a"}, {"ws1", "org-a", ""}, {"ws2", "org-z", ""}}},
		{"virtual key", func() error { return a.CreateVirtualKey(ctx, vk, providers.Settings{Provider: "openai"}) },
			[]want{{"ws2", "org-a", "org-b"}, {"ws2", "org-b", ""}}},
		{"config", func() error { return a.CreateConfig(ctx, cfg, json.RawMessage(`{}`)) },
			[]want{{"ws3", "org-a", "org-c"}}},
		{"another organisation's key in ws1", func() error {
			_, err := a.CreateAPIKey(ctx, &APIKey{Name: "k2", OrganisationID: "org-0", WorkspaceID: "ws1"})
			return err
		}, []want{{"ws1", "org-a", "org-0"}, {"ws1", "org-0", "org-a"}, {"ws1", "org-z", "org-0"}}},
		{"a revoked key still holds its workspace", func() error { _, err := a.RevokeAPIKey(ctx, key.ID); return err },
			[]want{{"ws1", "org-0", "org-a"}}},
		{"an update keeps one count", func() error {
			_, err := a.UpdateVirtualKey(ctx, vk.ID, func(r *VirtualKey, _ *providers.Settings) error { r.Note = "n"; return nil })
			return err
		}, []want{{"ws2", "org-a", "org-b"}}},
		{"deleted virtual key", func() error { return a.DeleteVirtualKey(ctx, vk.ID) },
			[]want{{"ws2", "org-a", ""}}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if err := b.Load(ctx); err != nil {
			t.Fatal(err)
		}
		for _, w := range st.want {
			for name, s := range map[string]*Store{"writer": a, "reader": b} {
				org, ok := s.ForeignOrganisation(w.ws, w.own)
				if org != w.org || ok != (w.org != "") {
					t.Errorf("%s: %s: ForeignOrganisation(%s, %s) = %q, %v; want %q", st.name, name, w.ws, w.own, org, ok, w.org)
				}
			}
		}
	}
}

// TestScopedListsMatchScan: a list narrowed to an organisation or a
// workspace (read from that scope's order) answers what a scan of every
// key with the same filter answers, page after page, after creates,
// updates and revocations following a bulk import.
func TestScopedListsMatchScan(t *testing.T) {
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	orgs, wss := []string{"o1", "o2"}, []string{"w1", "w2", "w3"}
	var ids []string
	mk := func() *APIKey {
		r := &APIKey{Name: fmt.Sprintf("key-%d", rng.IntN(50)), OrganisationID: orgs[rng.IntN(2)], WorkspaceID: wss[rng.IntN(3)], Type: TypeWorkspace}
		if rng.IntN(4) == 0 {
			r.Type = TypeOrganisation
		}
		return r
	}
	var bulk []*APIKey
	for i := range 40 {
		r := mk()
		r.ID, r.Digest = NewID(), s.Hasher().Sum(fmt.Sprintf("%s%043d", KeyPrefix, i)).String()
		bulk = append(bulk, r)
	}
	if err := s.ImportAPIKeys(ctx, bulk, 4); err != nil {
		t.Fatal(err)
	}
	for range 120 {
		r := mk()
		if _, err := s.CreateAPIKey(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	for i := range 20 {
		if _, err := s.UpdateAPIKey(ctx, ids[i*3], func(r *APIKey) error { r.Name = "renamed"; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RevokeAPIKey(ctx, ids[7]); err != nil {
		t.Fatal(err)
	}
	for _, org := range orgs {
		for _, ws := range append([]string{""}, wss...) {
			for _, noOrg := range []bool{false, true} {
				for _, search := range []string{"", "key-1"} {
					scoped := KeyFilter{Organisation: org, Workspace: ws, NoOrgKeys: noOrg, Search: search}
					scan := KeyFilter{Search: search, Keep: func(r *APIKey) bool {
						return r.OrganisationID == org && (ws == "" || r.WorkspaceID == ws) && !(noOrg && r.Type == TypeOrganisation)
					}}
					after := ""
					for page := 0; ; page++ {
						got, gotTotal, gotMore := s.SearchAPIKeys(scoped, after, 0, 7)
						want, wantTotal, wantMore := s.SearchAPIKeys(scan, after, 0, 7)
						if !slices.Equal(got, want) || gotTotal != wantTotal || gotMore != wantMore {
							t.Fatalf("%s/%s noOrg=%v search=%q page %d: %d keys (total %d, more %v), scan %d (total %d, more %v)",
								org, ws, noOrg, search, page, len(got), gotTotal, gotMore, len(want), wantTotal, wantMore)
						}
						if !gotMore {
							break
						}
						after = got[len(got)-1].ID
					}
				}
			}
		}
	}
}
