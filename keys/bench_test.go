package keys

import (
	"fmt"
	"testing"
)

// BenchmarkLookup authenticates one key among 10 and among 1,000,000:
// the cost is one HMAC and one map read either way.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			kv, _ := fileKV(b)
			s := newTestStore(b, kv, nil)
			var probe string
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("%s%043d", KeyPrefix, i)
				r := &APIKey{ID: fmt.Sprintf("%08d", i), Name: "k", Status: StatusActive, Digest: s.Hasher().Sum(k).String()}
				_ = s.idx.putAPIKey(r, false)
				if i == n/2 {
					probe = k
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, res := s.Lookup(probe); res != Valid {
					b.Fatal(res)
				}
			}
		})
	}
}

// BenchmarkSearchAPIKeys lists the first page of 50 among 1,000,000 keys
// in 100 workspaces, as the keys API does for a workspace key: with no
// search, with a name search and with an id prefix.
func BenchmarkSearchAPIKeys(b *testing.B) {
	kv, _ := fileKV(b)
	s := newTestStore(b, kv, nil)
	const n = 1_000_000
	s.mu.Lock()
	for i := 0; i < n; i++ {
		r := &APIKey{ID: NewID(), Name: fmt.Sprintf("service-%07d", i), OrganisationID: "org", WorkspaceID: fmt.Sprintf("ws-%02d", i%100), Type: TypeWorkspace,
			Status: StatusActive, Digest: s.Hasher().Sum(fmt.Sprintf("%s%043d", KeyPrefix, i)).String()}
		_ = s.idx.putAPIKey(r, false)
	}
	s.idx.sortOrder()
	probe := s.idx.order[n/2].id[:20]
	middle := s.idx.order[n/2].id
	s.mu.Unlock()
	ws := func(r *APIKey) bool { return r.WorkspaceID == "ws-07" }
	// The keys API's lists name their scope (an organisation key: its
	// organisation; a workspace key: its workspace, without organisation
	// keys), read from that scope's order.
	orgScope := KeyFilter{Organisation: "org"}
	wsScope := KeyFilter{Organisation: "org", Workspace: "ws-07", NoOrgKeys: true}
	for _, tc := range []struct {
		name  string
		f     KeyFilter
		after string
	}{
		{"all", KeyFilter{Keep: ws}, ""},
		{"name", KeyFilter{Keep: ws, Search: "CE-00012"}, ""},
		{"id-prefix", KeyFilter{Keep: ws, Search: probe}, ""},
		{"organisation-scope", orgScope, ""},
		{"organisation-scope-cursor", orgScope, middle},
		{"workspace-scope", wsScope, ""},
		{"workspace-scope-cursor", wsScope, middle},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if page, _, _ := s.SearchAPIKeys(tc.f, tc.after, 0, 50); len(page) == 0 && tc.f.Search == "" {
					b.Fatal("empty page")
				}
			}
		})
	}
}
