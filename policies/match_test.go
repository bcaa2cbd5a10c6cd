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
		{"request organisation unknown", []Condition{{KeyAPIKey, "*"}}, testOrg, func(a *Attributes) { a.OrganisationID = "" }, true},
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

func TestGroupKey(t *testing.T) {
	const id = "0b6f7e4c-2a43-4f0e-8f6d-5b8a9c1d2e3f"
	p := &Policy{ID: id, GroupBy: []GroupBy{{KeyAPIKey}, {"metadata._user"}}}
	cases := []struct {
		name string
		a    *Attributes
		want string
	}{
		{"plain", &Attributes{APIKey: "k1", Metadata: map[string]string{"_user": "alice"}}, id + "|api_key=k1|metadata._user=alice"},
		{"absent is empty", &Attributes{APIKey: "k1"}, id + "|api_key=k1|metadata._user="},
		{"nil attributes", nil, id + "|api_key=|metadata._user="},
		{"escaped", &Attributes{APIKey: `a|b=c\d`}, id + `|api_key=a\|b\=c\\d|metadata._user=`},
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
