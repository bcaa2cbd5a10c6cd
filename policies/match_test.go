package policies

import (
	"testing"
)

func fullAttrs() *Attributes {
	return &Attributes{
		WorkspaceID:    "ws-1",
		OrganisationID: testOrg,
		APIKey:         "team-a-key",
		VirtualKey:     "openai-prod",
		Provider:       "openai",
		Model:          "gpt-4o",
		ConfigID:       "cfg-1",
		Metadata:       map[string]string{"_user": "alice", "team": "search", "empty": ""},
	}
}

func TestAttributesGet(t *testing.T) {
	a := fullAttrs()
	cases := []struct {
		key  string
		want string
		ok   bool
	}{
		{KeyWorkspaceID, "ws-1", true},
		{KeyOrganisationID, testOrg, true},
		{KeyAPIKey, "team-a-key", true},
		{KeyVirtualKey, "openai-prod", true},
		{KeyProvider, "openai", true},
		{KeyModel, "gpt-4o", true},
		{KeyConfigID, "cfg-1", true},
		{"metadata._user", "alice", true},
		{"metadata.team", "search", true},
		{"metadata.empty", "", false},
		{"metadata.missing", "", false},
		{"metadata.", "", false},
		{"metadata", "", false},
		{"user", "", false},
	}
	for _, c := range cases {
		v, ok := a.Get(c.key)
		if v != c.want || ok != c.ok {
			t.Errorf("Get(%q) = %q, %v; want %q, %v", c.key, v, ok, c.want, c.ok)
		}
	}
	if _, ok := (&Attributes{}).Get(KeyModel); ok {
		t.Error("empty attribute reported present")
	}
	if _, ok := (*Attributes)(nil).Get(KeyModel); ok {
		t.Error("nil Attributes reported present")
	}
}

func TestMatches(t *testing.T) {
	cases := []struct {
		name  string
		conds []Condition
		org   string
		edit  func(a *Attributes)
		want  bool
	}{
		{"exact", []Condition{{KeyAPIKey, "team-a-key"}}, "", nil, true},
		{"exact mismatch", []Condition{{KeyAPIKey, "team-b-key"}}, "", nil, false},
		{"case sensitive", []Condition{{KeyModel, "GPT-4o"}}, "", nil, false},
		{"wildcard present", []Condition{{KeyVirtualKey, "*"}}, "", nil, true},
		{"wildcard absent", []Condition{{KeyVirtualKey, "*"}}, "", func(a *Attributes) { a.VirtualKey = "" }, false},
		{"wildcard empty metadata", []Condition{{"metadata.empty", "*"}}, "", nil, false},
		{"metadata exact", []Condition{{"metadata._user", "alice"}}, "", nil, true},
		{"metadata absent", []Condition{{"metadata.region", "eu"}}, "", nil, false},
		{"metadata nil map", []Condition{{"metadata._user", "*"}}, "", func(a *Attributes) { a.Metadata = nil }, false},
		{"all must hold", []Condition{{KeyProvider, "openai"}, {KeyModel, "gpt-4o"}, {"metadata.team", "*"}}, "", nil, true},
		{"one fails", []Condition{{KeyProvider, "openai"}, {KeyModel, "gpt-3.5"}}, "", nil, false},
		{"unknown key never matches", []Condition{{"ip", "*"}}, "", nil, false},
		{"literal star value", []Condition{{KeyModel, "*"}}, "", func(a *Attributes) { a.Model = "*" }, true},
		{"same organisation", []Condition{{KeyAPIKey, "*"}}, testOrg, nil, true},
		{"other organisation", []Condition{{KeyAPIKey, "*"}}, "00000000-0000-4000-8000-000000000000", nil, false},
		// A tenant's policy never applies outside it, even to a request
		// whose tenant is unknown: only Caddyfile policies (no tenant)
		// apply everywhere.
		{"request organisation unknown", []Condition{{KeyAPIKey, "*"}}, testOrg, func(a *Attributes) { a.OrganisationID = "" }, false},
		{"no tenant applies everywhere", []Condition{{KeyAPIKey, "*"}}, "", func(a *Attributes) { a.OrganisationID, a.WorkspaceID = "", "" }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &Policy{Conditions: c.conds, OrganisationID: c.org}
			a := fullAttrs()
			if c.edit != nil {
				c.edit(a)
			}
			if got := p.Matches(a); got != c.want {
				t.Fatalf("Matches = %v, want %v", got, c.want)
			}
		})
	}
	if (&Policy{Conditions: []Condition{{KeyAPIKey, "*"}}}).Matches(nil) {
		t.Fatal("nil Attributes matched")
	}
}

// TestMatchesWorkspace is the tenancy rule: a policy applies only in its
// own workspace and organisation, whatever its conditions say.
func TestMatchesWorkspace(t *testing.T) {
	const otherWS = "ws-2"
	cases := []struct {
		name    string
		ws, org string
		conds   []Condition
		reqWS   string
		want    bool
	}{
		{"own workspace", "ws-1", testOrg, []Condition{{KeyAPIKey, "*"}}, "ws-1", true},
		{"other workspace of the organisation", otherWS, testOrg, []Condition{{KeyAPIKey, "*"}}, "ws-1", false},
		{"conditions naming the request's workspace", otherWS, testOrg, []Condition{{KeyWorkspaceID, "ws-1"}}, "ws-1", false},
		{"conditions naming another workspace", "ws-1", testOrg, []Condition{{KeyWorkspaceID, otherWS}}, otherWS, false},
		{"request workspace unknown", "ws-1", testOrg, []Condition{{KeyAPIKey, "*"}}, "", false},
		{"caddyfile policy", "", "", []Condition{{KeyAPIKey, "*"}}, otherWS, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &Policy{WorkspaceID: c.ws, OrganisationID: c.org, Conditions: c.conds}
			a := fullAttrs()
			a.WorkspaceID = c.reqWS
			if got := p.Matches(a); got != c.want {
				t.Fatalf("Matches = %v, want %v", got, c.want)
			}
			if got := p.InScope(c.reqWS, testOrg); got != (c.ws == "" || c.ws == c.reqWS) {
				t.Fatalf("InScope = %v", got)
			}
		})
	}
}

// TestMatchPending checks the lazy protocol the enforcement path uses:
// Match asks for exactly the groups the deciding conditions read, never
// for a group once a filled condition already failed, and gives the same
// answer as Matches once everything is filled.
func TestMatchPending(t *testing.T) {
	all := PendingRouting | PendingMetadata | PendingModel
	cases := []struct {
		name     string
		ws       string
		conds    []Condition
		wantNeed Pending
		want     bool
	}{
		{"known only", "ws-1", []Condition{{KeyAPIKey, "team-a-key"}}, 0, true},
		{"routing", "ws-1", []Condition{{KeyProvider, "openai"}}, PendingRouting, true},
		{"metadata and model", "ws-1", []Condition{{"metadata.team", "*"}, {KeyModel, "gpt-4o"}}, PendingMetadata | PendingModel, true},
		{"filled condition fails first", "ws-1", []Condition{{KeyModel, "gpt-4o"}, {KeyAPIKey, "nobody"}}, 0, false},
		{"other tenant needs nothing", "ws-2", []Condition{{KeyProvider, "openai"}}, 0, false},
		{"routing fails once filled", "ws-1", []Condition{{KeyProvider, "anthropic"}}, PendingRouting, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &Policy{WorkspaceID: c.ws, OrganisationID: testOrg, Conditions: c.conds}
			full := fullAttrs()
			lazy := &Attributes{WorkspaceID: full.WorkspaceID, OrganisationID: full.OrganisationID, APIKey: full.APIKey, Pending: all}
			ok, need := p.Match(lazy)
			if need != c.wantNeed || (need == 0 && ok != c.want) {
				t.Fatalf("Match = %v, %b; want need %b", ok, need, c.wantNeed)
			}
			if need != 0 && ok {
				t.Fatal("Match answered true with groups pending")
			}
			if p.Matches(lazy) && need != 0 {
				t.Fatal("Matches true with groups pending")
			}
			if got := p.Matches(full); got != c.want {
				t.Fatalf("Matches(full) = %v, want %v", got, c.want)
			}
		})
	}
	for key, want := range map[string]Pending{KeyProvider: PendingRouting, KeyVirtualKey: PendingRouting, KeyConfigID: PendingRouting,
		KeyModel: PendingModel, "metadata.x": PendingMetadata, KeyAPIKey: 0, KeyWorkspaceID: 0, "metadata.": 0} {
		if got := PendingOf(key); got != want {
			t.Errorf("PendingOf(%q) = %b, want %b", key, got, want)
		}
	}
	if n := (&Policy{GroupBy: []GroupBy{{KeyAPIKey}, {KeyModel}, {"metadata.u"}}}).Needs(); n != PendingModel|PendingMetadata {
		t.Errorf("Needs = %b", n)
	}
}

func TestGroupKey(t *testing.T) {
	const id = "0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f"
	p := &Policy{ID: id, GroupBy: []GroupBy{{KeyAPIKey}, {"metadata._user"}}}
	cases := []struct {
		name string
		a    *Attributes
		want string
	}{
		{"plain", &Attributes{WorkspaceID: "ws-1", APIKey: "k1", Metadata: map[string]string{"_user": "alice"}}, id + "|api_key=ws-1=k1|metadata._user=alice"},
		{"absent is empty", &Attributes{WorkspaceID: "ws-1", APIKey: "k1"}, id + "|api_key=ws-1=k1|metadata._user="},
		{"another workspace's key of the same name", &Attributes{WorkspaceID: "ws-2", APIKey: "k1"}, id + "|api_key=ws-2=k1|metadata._user="},
		{"nil attributes", nil, id + "|api_key=|metadata._user="},
		{"escaped", &Attributes{WorkspaceID: `w=1`, APIKey: `a|b=c\d`}, id + `|api_key=w\=1=a\|b\=c\\d|metadata._user=`},
	}
	for _, c := range cases {
		if got := p.GroupKey(c.a); got != c.want {
			t.Errorf("%s: GroupKey = %q, want %q", c.name, got, c.want)
		}
	}

	// Distinct tuples must never share a key.
	two := &Policy{ID: id, GroupBy: []GroupBy{{"metadata.x"}, {"metadata.y"}}}
	tuples := [][2]string{
		{"a|b", "c"}, {"a", "b|c"},
		{"a=", "b"}, {"a", "=b"},
		{`a\`, "b"}, {"a", `\b`},
		{`a\|`, "b"}, {`a`, `|b`},
		{"", "a"}, {"a", ""},
		{"a|metadata.y=b", ""}, {"a", "b"},
	}
	seen := map[string][2]string{}
	for _, tu := range tuples {
		k := two.GroupKey(&Attributes{Metadata: map[string]string{"x": tu[0], "y": tu[1]}})
		if prev, ok := seen[k]; ok {
			t.Errorf("tuples %q and %q share key %q", prev, tu, k)
		}
		seen[k] = tu
	}

	// Another policy, or the same values under other keys, is another counter.
	other := &Policy{ID: "1b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f", GroupBy: p.GroupBy}
	a := &Attributes{APIKey: "k1"}
	if p.GroupKey(a) == other.GroupKey(a) {
		t.Error("two policies share a counter key")
	}
	byModel := &Policy{ID: id, GroupBy: []GroupBy{{KeyModel}}}
	byKey := &Policy{ID: id, GroupBy: []GroupBy{{KeyAPIKey}}}
	if byModel.GroupKey(&Attributes{Model: "x"}) == byKey.GroupKey(&Attributes{APIKey: "x"}) {
		t.Error("editing group_by keeps the old counter")
	}
}

func TestMatchAndGroupKeyAllocations(t *testing.T) {
	p := &Policy{
		ID:         "0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f",
		Conditions: []Condition{{KeyProvider, "openai"}, {"metadata.team", "*"}},
		GroupBy:    []GroupBy{{KeyAPIKey}, {"metadata._user"}},
	}
	a := fullAttrs()
	if n := testing.AllocsPerRun(1000, func() { p.Matches(a) }); n != 0 {
		t.Errorf("Matches allocates %.1f times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = p.GroupKey(a) }); n > 1 {
		t.Errorf("GroupKey allocates %.1f times, want 1", n)
	}
}
