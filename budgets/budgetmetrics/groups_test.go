package budgetmetrics

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

const (
	wsA = "0f8fad5b-d9cb-469f-a165-70867728950e"
	wsB = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	org = "9b2e6a4c-3f1d-4e8a-b7c5-2d6f0a1e9c38"
)

// limit returns a prepared usage limit.
func limit(t testing.TB, u budgets.UsageLimit) *budgets.UsageLimit {
	t.Helper()
	if u.Type == "" {
		u.Type = policies.TypeCost
	}
	if u.CreditLimit == 0 {
		u.CreditLimit = 10
	}
	if u.Conditions == nil {
		u.Conditions = []policies.Condition{{Key: policies.KeyWorkspaceID, Value: "*"}}
	}
	if err := u.Prepare(); err != nil {
		t.Fatal(err)
	}
	return &u
}

func byKey(key string) []policies.GroupBy { return []policies.GroupBy{{Key: key}} }

func keyAttrs(ws, name string) *policies.Attributes {
	return &policies.Attributes{WorkspaceID: ws, OrganisationID: org, APIKey: name}
}

// TestGroupsBounded: the set keeps at most its bound of groups, the most
// recently seen; seeing a group again keeps it.
func TestGroupsBounded(t *testing.T) {
	u := limit(t, budgets.UsageLimit{ID: "per-key", WorkspaceID: wsA, GroupBy: byKey(policies.KeyAPIKey)})
	g := NewGroups(3)
	for i := 0; i < 3; i++ {
		g.Note([]*budgets.UsageLimit{u}, keyAttrs(wsA, "k"+strconv.Itoa(i)))
	}
	g.Note([]*budgets.UsageLimit{u}, keyAttrs(wsA, "k0")) // k0 seen again: k1 is now the oldest
	g.Note([]*budgets.UsageLimit{u}, keyAttrs(wsA, "k3"))
	if g.Len() != 3 {
		t.Fatalf("%d groups, want the bound 3", g.Len())
	}
	var got []string
	for _, gr := range g.list(map[string]*budgets.UsageLimit{u.ID: u}) {
		got = append(got, gr.label)
	}
	if want := "api_key=k3 api_key=k0 api_key=k2"; strings.Join(got, " ") != want {
		t.Errorf("groups %v, want %s", got, want)
	}
	if g.list(map[string]*budgets.UsageLimit{}); g.Len() != 0 {
		t.Errorf("%d groups of a limit no longer active kept", g.Len())
	}
	if NewGroups(0).max != MaxGroups {
		t.Error("the default bound is not MaxGroups")
	}
}

// TestNoteMatchesAndCopies: a request is noted only under the limits
// that match it, once per group however often it comes, and the set
// keeps a copy of its description, not the request's own.
func TestNoteMatchesAndCopies(t *testing.T) {
	gpt := limit(t, budgets.UsageLimit{ID: "gpt", Conditions: []policies.Condition{{Key: policies.KeyModel, Value: "gpt-4o"}},
		GroupBy: byKey("metadata.team")})
	other := limit(t, budgets.UsageLimit{ID: "other-ws", WorkspaceID: wsB, GroupBy: byKey(policies.KeyAPIKey)})
	g := NewGroups(0)
	a := &policies.Attributes{WorkspaceID: wsA, Model: "gpt-4o", Metadata: map[string]string{"team": "red"}}
	for i := 0; i < 3; i++ {
		g.Note([]*budgets.UsageLimit{gpt, other}, a)
	}
	if g.Len() != 1 {
		t.Fatalf("%d groups, want 1 (the gpt limit's red team)", g.Len())
	}
	a.Metadata["team"] = "blue"
	gr := g.list(map[string]*budgets.UsageLimit{gpt.ID: gpt})[0]
	if gr.label != "metadata.team=red" || gr.attrs.Metadata["team"] != "red" || gr.attrs == a {
		t.Errorf("group %q holds %v: not a copy of the request", gr.label, gr.attrs)
	}
	g.Note([]*budgets.UsageLimit{gpt}, &policies.Attributes{WorkspaceID: wsA, Model: "o3", Metadata: map[string]string{"team": "red"}})
	if g.Len() != 1 {
		t.Error("a request the limit does not match was noted")
	}
}

func TestLabel(t *testing.T) {
	long := strings.Repeat("é", MaxLabelBytes)
	tests := []struct {
		name string
		u    budgets.UsageLimit
		a    *policies.Attributes
		want string
	}{
		{"no group_by", budgets.UsageLimit{}, keyAttrs(wsA, "team-a"), "all"},
		{"key in a workspace's limit", budgets.UsageLimit{WorkspaceID: wsA, GroupBy: byKey(policies.KeyAPIKey)}, keyAttrs(wsA, "team-a"), "api_key=team-a"},
		{"key in a limit across workspaces", budgets.UsageLimit{GroupBy: byKey(policies.KeyAPIKey)}, keyAttrs(wsA, "team-a"), "workspace_id=" + wsA + ",api_key=team-a"},
		{"workspace and key", budgets.UsageLimit{GroupBy: []policies.GroupBy{{Key: policies.KeyWorkspaceID}, {Key: policies.KeyAPIKey}}},
			keyAttrs(wsA, "team-a"), "workspace_id=" + wsA + ",api_key=team-a"},
		{"metadata", budgets.UsageLimit{GroupBy: byKey("metadata.user")}, &policies.Attributes{Metadata: map[string]string{"user": "u1"}}, "metadata.user=u1"},
		{"absent value", budgets.UsageLimit{GroupBy: byKey("metadata.user")}, &policies.Attributes{}, "metadata.user="},
		{"long value", budgets.UsageLimit{GroupBy: byKey("metadata.user")}, &policies.Attributes{Metadata: map[string]string{"user": long}},
			("metadata.user=" + long)[:MaxLabelBytes]},
		{"invalid UTF-8", budgets.UsageLimit{GroupBy: byKey("metadata.user")}, &policies.Attributes{Metadata: map[string]string{"user": "a\xffb"}}, "metadata.user=a\uFFFDb"},
	}
	for _, tt := range tests {
		got := Label(&tt.u, tt.a)
		if tt.name == "long value" {
			// cut at a character boundary
			if len(got) > MaxLabelBytes || !utf8.ValidString(got) || !strings.HasPrefix("metadata.user="+long, got) || len(got) < MaxLabelBytes-1 {
				t.Errorf("%s: %q (%d bytes)", tt.name, got, len(got))
			}
			continue
		}
		if got != tt.want {
			t.Errorf("%s: Label = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// BenchmarkNoteSeen is what admission pays per request on a limit whose
// group is already tracked.
func BenchmarkNoteSeen(b *testing.B) {
	u := limit(b, budgets.UsageLimit{ID: "per-key", WorkspaceID: wsA, GroupBy: byKey(policies.KeyAPIKey)})
	limits := []*budgets.UsageLimit{u}
	g := NewGroups(0)
	a := keyAttrs(wsA, "team-a")
	g.Note(limits, a)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		g.Note(limits, a)
	}
}
