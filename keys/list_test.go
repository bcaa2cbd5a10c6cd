package keys

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// TestSearchAPIKeys: search matches a name's substring whatever its case,
// or an id's prefix; status and keep narrow it; after and offset page
// through the matches, and total counts all of them.
func TestSearchAPIKeys(t *testing.T) {
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	names := []string{"Billing-Prod", "billing-staging", "search-api", "Ops", "BILLING-archive"}
	ids := map[string]string{}
	for _, n := range names {
		r := &APIKey{Name: n, WorkspaceID: "ws1"}
		if n == "Ops" {
			r.WorkspaceID = "ws2"
		}
		if _, err := s.CreateAPIKey(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids[n] = r.ID
	}
	if _, err := s.UpdateAPIKey(ctx, ids["billing-staging"], func(r *APIKey) error { r.Status = StatusRevoked; return nil }); err != nil {
		t.Fatal(err)
	}
	ws1 := func(r *APIKey) bool { return r.WorkspaceID == "ws1" }
	for _, tc := range []struct {
		name  string
		f     KeyFilter
		after string
		off   int
		limit int
		want  []string
		total int
		more  bool
	}{
		{"everything", KeyFilter{}, "", 0, 10, names, 5, false},
		{"name, any case", KeyFilter{Search: "billing"}, "", 0, 10, []string{"Billing-Prod", "billing-staging", "BILLING-archive"}, 3, false},
		{"upper-case search", KeyFilter{Search: "PROD"}, "", 0, 10, []string{"Billing-Prod"}, 1, false},
		{"id prefix", KeyFilter{Search: ids["Ops"][:36]}, "", 0, 10, []string{"Ops"}, 1, false},
		{"status", KeyFilter{Search: "billing", Status: StatusActive}, "", 0, 10, []string{"Billing-Prod", "BILLING-archive"}, 2, false},
		{"keep", KeyFilter{Keep: ws1, Search: "o"}, "", 0, 10, []string{"Billing-Prod"}, 1, false},
		{"first page", KeyFilter{Search: "billing"}, "", 0, 2, []string{"Billing-Prod", "billing-staging"}, 3, true},
		{"after a cursor", KeyFilter{Search: "billing"}, ids["billing-staging"], 0, 2, []string{"BILLING-archive"}, 3, false},
		{"offset", KeyFilter{Search: "billing"}, "", 1, 1, []string{"billing-staging"}, 3, true},
		{"nothing", KeyFilter{Search: "nope"}, "", 0, 10, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, total, more := s.SearchAPIKeys(tc.f, tc.after, tc.off, tc.limit)
			var got []string
			for _, r := range page {
				got = append(got, r.Name)
			}
			if !slices.Equal(got, tc.want) || total != tc.total || more != tc.more {
				t.Fatalf("got %v total %d more %v; want %v total %d more %v", got, total, more, tc.want, tc.total, tc.more)
			}
		})
	}
	// A rename is found under its new name, not its old one.
	if _, err := s.UpdateAPIKey(ctx, ids["Ops"], func(r *APIKey) error { r.Name = "Platform"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, n, _ := s.SearchAPIKeys(KeyFilter{Search: "ops"}, "", 0, 10); n != 0 {
		t.Fatalf("the old name still matches %d keys", n)
	}
	if p, _, _ := s.SearchAPIKeys(KeyFilter{Search: "platform"}, "", 0, 10); len(p) != 1 || p[0].ID != ids["Ops"] {
		t.Fatalf("the new name is not found: %v", p)
	}
}

// TestImportAPIKeys: imported records authenticate, list in id order
// and survive a reload from the KV; a bad batch is refused whole before
// anything is written.
func TestImportAPIKeys(t *testing.T) {
	kv, _ := fileKV(t)
	s := newTestStore(t, kv, nil)
	ctx := context.Background()
	if _, err := s.CreateAPIKey(ctx, &APIKey{Name: "made"}); err != nil {
		t.Fatal(err)
	}
	var recs []*APIKey
	var secrets []string
	for i := 0; i < 20; i++ {
		k := NewKey()
		secrets = append(secrets, k)
		recs = append(recs, &APIKey{ID: NewID(), Name: fmt.Sprintf("imported-%02d", i), Digest: s.Hasher().Sum(k).String(), Prefix: k[:DisplayLen]})
	}
	for _, bad := range [][]*APIKey{
		{{ID: "not-a-uuid", Digest: recs[0].Digest}},
		{{ID: NewID()}},
		{recs[0], recs[0]},
	} {
		if err := s.ImportAPIKeys(ctx, bad, 4); err == nil {
			t.Fatalf("importing %+v succeeded", bad[0])
		}
	}
	if _, n, _ := s.SearchAPIKeys(KeyFilter{}, "", 0, 1); n != 1 {
		t.Fatalf("a refused import changed the store: %d keys", n)
	}
	if err := s.ImportAPIKeys(ctx, recs, 4); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		if _, rec, res := s.Lookup(secrets[7]); res != Valid || rec.Name != "imported-07" {
			t.Fatalf("an imported key: %v %v", res, rec)
		}
		page, total, _ := s.SearchAPIKeys(KeyFilter{Search: "IMPORTED"}, "", 0, 100)
		if total != 20 || !slices.IsSortedFunc(page, func(a, b *APIKey) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatalf("imported keys listed: %d", total)
		}
		if page[0].Status != StatusActive || page[0].CreatedAt.IsZero() {
			t.Fatalf("defaults not set: %+v", page[0])
		}
	}
	check(s)
	again := newTestStore(t, kv, nil) // another instance, or a restart
	check(again)
	if err := s.ImportAPIKeys(ctx, recs[:1], 1); err == nil {
		t.Fatal("importing an existing id succeeded")
	}
}

// TestImportPropagates: another instance on the same Redis serves the
// imported keys after the one announcement (its poll is too slow to be
// what delivers them within the wait).
func TestImportPropagates(t *testing.T) {
	c := redistest.Client(t, propagationDB)
	prefix := fmt.Sprintf("import-test-%d/keys", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx := context.Background()
		for it := c.Scan(ctx, 0, strings.SplitN(prefix, "/", 2)[0]+"*", 100).Iterator(); it.Next(ctx); {
			c.Del(ctx, it.Val())
		}
	})
	mk := func() *Store {
		h, _ := NewHasher(testSecret)
		opts := Options{KV: kvstore.NewRedis(c, 0), Redis: c, Prefix: prefix, Hasher: h, Poll: time.Minute}
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Init(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(s.Stop)
		return s
	}
	a, b := mk(), mk()
	// b has applied a's counter: without the announcement it would not
	// look again for a minute.
	if _, err := a.CreateAPIKey(context.Background(), &APIKey{Name: "first"}); err != nil {
		t.Fatal(err)
	}
	var recs []*APIKey
	var last string
	for i := 0; i < 5; i++ {
		last = NewKey()
		recs = append(recs, &APIKey{ID: NewID(), Name: fmt.Sprint("bulk-", i), Digest: a.Hasher().Sum(last).String()})
	}
	if err := a.ImportAPIKeys(context.Background(), recs, 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, last, Valid)
	if _, n, _ := b.SearchAPIKeys(KeyFilter{Search: "bulk-"}, "", 0, 10); n != 5 {
		t.Fatalf("the other instance lists %d imported keys", n)
	}
}
