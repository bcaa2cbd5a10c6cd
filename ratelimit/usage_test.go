package ratelimit

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// TestUsageGroup checks which groups a caller may name on a policy and
// that its own identity fills the attributes it does not name.
func TestUsageGroup(t *testing.T) {
	p := &policies.Policy{ID: "6f1c1e0e-8f55-4b8f-9a86-7b9a3a0c9f21", GroupBy: []policies.GroupBy{{Key: "api_key"}, {Key: "workspace_id"}, {Key: "metadata.team"}}}
	tests := []struct {
		name      string
		query     string
		wantField string
		want      map[string]string
	}{
		{name: "own group", query: "", want: map[string]string{"api_key": "alice", "workspace_id": testWS, "metadata.team": ""}},
		{name: "another key of the workspace", query: "api_key=bob&metadata.team=red", want: map[string]string{"api_key": "bob", "workspace_id": testWS, "metadata.team": "red"}},
		{name: "own workspace repeated", query: "workspace_id=" + testWS, want: map[string]string{"api_key": "alice", "workspace_id": testWS, "metadata.team": ""}},
		{name: "another workspace", query: "workspace_id=" + otherWS, wantField: "workspace_id"},
		{name: "not grouped by", query: "model=gpt-4o", wantField: "model"},
		{name: "unknown key", query: "status=active", wantField: "status"},
		{name: "given twice", query: "api_key=a&api_key=b", wantField: "api_key"},
		{name: "value of 256 bytes", query: "metadata.team=" + strings.Repeat("x", 256), want: map[string]string{"api_key": "alice", "workspace_id": testWS, "metadata.team": strings.Repeat("x", 256)}},
		{name: "value of 257 bytes", query: "metadata.team=" + strings.Repeat("x", 257), wantField: "metadata.team"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			a, group, err := groupOf(p, q, testAlice)
			if tt.wantField != "" {
				var fe *policies.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantField {
					t.Fatalf("error %v, want a FieldError on %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if group[k] != v {
					t.Fatalf("group[%s] = %q, want %q", k, group[k], v)
				}
			}
			if len(group) != len(tt.want) {
				t.Fatalf("group %v", group)
			}
			// The group is the counter's: the attributes give the same
			// key as a request of that group would.
			req := &policies.Attributes{WorkspaceID: testWS, OrganisationID: testOrg, APIKey: tt.want["api_key"], Model: "m",
				Metadata: map[string]string{"team": tt.want["metadata.team"]}}
			if p.GroupKey(a) != p.GroupKey(req) {
				t.Fatalf("counter key %q, a request's %q", p.GroupKey(a), p.GroupKey(req))
			}
		})
	}
}

// TestUsageOf: the usage read matches what requests spent, spends nothing
// itself, and reports cost in dollars.
func TestUsageOf(t *testing.T) {
	ctl := newControl()
	ctx := context.Background()
	reqs := addPolicy(t, ctl, "requests", "rpm", 10, cond("api_key", "*"), "api_key")
	cost := addPolicy(t, ctl, "cost", "rph", 2, cond("api_key", "*"), "api_key")
	alice := &policies.Attributes{WorkspaceID: testWS, OrganisationID: testOrg, APIKey: "alice"}
	for range 3 {
		if d, err := ctl.limiter.Admit(ctx, reqs.GroupKey(alice), reqs.Limit(), reqs.Window(), 1); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	if _, err := ctl.limiter.Admit(ctx, cost.GroupKey(alice), cost.Limit(), cost.Window(), 500_000); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                   string
		p                      *policies.Policy
		key                    string
		used, remaining, value float64
		counted                bool
	}{
		{name: "requests, alice", p: reqs, key: "alice", used: 3, remaining: 7, value: 10, counted: true},
		{name: "requests, bob", p: reqs, key: "bob", used: 0, remaining: 10, value: 10},
		{name: "cost in dollars", p: cost, key: "alice", used: 0.5, remaining: 1.5, value: 2, counted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // a read spends nothing: twice, the same answer
				a := &policies.Attributes{WorkspaceID: testWS, OrganisationID: testOrg, APIKey: tt.key}
				u, err := usageOf(ctx, ctl.limiter, tt.p, a, map[string]string{"api_key": tt.key})
				if err != nil {
					t.Fatal(err)
				}
				if u.Used != tt.used || u.Remaining != tt.remaining || u.Value != tt.value || u.Object != ObjectUsage || u.PolicyID != tt.p.ID {
					t.Fatalf("%+v", u)
				}
				if (u.WindowEnds != nil) != tt.counted || (u.ResetAfter > 0) != tt.counted {
					t.Fatalf("window %v, reset after %v", u.WindowEnds, u.ResetAfter)
				}
			}
		})
	}
	if _, err := usageOf(ctx, failingLimiter{}, reqs, alice, nil); err == nil {
		t.Fatal("a limiter failure was not reported")
	}
}

// TestIdentityGrouped: only policies grouped by the caller's identity have
// one group of "the caller".
func TestIdentityGrouped(t *testing.T) {
	for _, tt := range []struct {
		keys []string
		want bool
	}{
		{[]string{"api_key"}, true},
		{[]string{"workspace_id", "organisation_id"}, true},
		{[]string{"api_key", "model"}, false},
		{[]string{"metadata.team"}, false},
	} {
		var g []policies.GroupBy
		for _, k := range tt.keys {
			g = append(g, policies.GroupBy{Key: k})
		}
		if IdentityGrouped(g) != tt.want {
			t.Errorf("%v: %v", tt.keys, !tt.want)
		}
	}
}
