package ratelimit

import (
	"errors"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// TestApplyUpdate checks what PUT may change and how each field is
// validated.
func TestApplyUpdate(t *testing.T) {
	name := "old"
	base := func() *policies.Policy {
		return &policies.Policy{ID: "6f1c1e0e-8f55-4b8f-9a86-7b9a3a0c9f21", Type: "requests", Unit: "rpm", Value: 10, Status: "active",
			WorkspaceID: testWS, OrganisationID: testOrg, Name: &name,
			Conditions: cond("api_key", "*"), GroupBy: []policies.GroupBy{{Key: "api_key"}}}
	}
	tests := []struct {
		name      string
		body      string
		wantField string
		check     func(*policies.Policy) bool
	}{
		{name: "value", body: `{"value":25}`, check: func(p *policies.Policy) bool { return p.Value == 25 && *p.Name == "old" }},
		{name: "name cleared", body: `{"name":null}`, check: func(p *policies.Policy) bool { return p.Name == nil }},
		{name: "name set", body: `{"name":"new"}`, check: func(p *policies.Policy) bool { return *p.Name == "new" }},
		{name: "conditions replaced", body: `{"conditions":[{"key":"model","value":"gpt-4o"}]}`,
			check: func(p *policies.Policy) bool { return len(p.Conditions) == 1 && p.Conditions[0].Key == "model" }},
		{name: "group_by replaced", body: `{"group_by":[{"key":"workspace_id"},{"key":"model"}]}`,
			check: func(p *policies.Policy) bool { return len(p.GroupBy) == 2 }},
		{name: "unit", body: `{"unit":"rph"}`, check: func(p *policies.Policy) bool { return p.Unit == "rph" }},
		{name: "record sent back unchanged", body: `{"id":"x","type":"requests","status":"active","workspace_id":"` + testWS + `","organisation_id":"` + testOrg + `","object":"policy_rate_limits","created_at":"2020-01-01T00:00:00Z","value":11}`,
			check: func(p *policies.Policy) bool { return p.Value == 11 && p.ID == "6f1c1e0e-8f55-4b8f-9a86-7b9a3a0c9f21" }},
		{name: "not an object", body: `[1]`, wantField: "body"},
		{name: "empty body", body: ``, wantField: "body"},
		{name: "value zero", body: `{"value":0}`, wantField: "value"},
		{name: "value null", body: `{"value":null}`, wantField: "value"},
		{name: "value text", body: `{"value":"5"}`, wantField: "value"},
		{name: "empty conditions", body: `{"conditions":[]}`, wantField: "conditions"},
		{name: "null conditions", body: `{"conditions":null}`, wantField: "conditions"},
		{name: "empty group_by", body: `{"group_by":[]}`, wantField: "group_by"},
		{name: "bad condition key", body: `{"conditions":[{"key":"user","value":"x"}]}`, wantField: "conditions[0].key"},
		{name: "long name", body: `{"name":"` + longName + `"}`, wantField: "name"},
		{name: "bad unit", body: `{"unit":"rps"}`, wantField: "unit"},
		{name: "type change", body: `{"type":"tokens"}`, wantField: "type"},
		{name: "status change", body: `{"status":"archived"}`, wantField: "status"},
		{name: "workspace change", body: `{"workspace_id":"` + otherWS + `"}`, wantField: "workspace_id"},
		{name: "organisation change", body: `{"organisation_id":"` + otherOrg + `"}`, wantField: "organisation_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			err := applyUpdate(p, []byte(tt.body))
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
			if !tt.check(p) {
				t.Fatalf("%+v", p)
			}
		})
	}
}

var longName = func() string {
	b := make([]byte, policies.MaxNameLength+1)
	for i := range b {
		b[i] = 'n'
	}
	return string(b)
}()

// TestOwned checks the policy API's tenancy rule: a record is the
// caller's only when both its workspace and its organisation are the
// key's, and records without a tenant (Caddyfile policies) are never
// reachable through the API.
func TestOwned(t *testing.T) {
	tests := []struct {
		name    string
		ws, org string
		caller  *identity.Caller
		want    bool
	}{
		{"own", testWS, testOrg, testAlice, true},
		{"another key of the workspace", testWS, testOrg, testBob, true},
		{"another workspace of the organisation", testWS, testOrg, testDan, false},
		{"another organisation", testWS, testOrg, testCarol, false},
		{"same workspace id in another organisation", testWS, otherOrg, testAlice, false},
		{"no tenant", "", "", testAlice, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &policies.Policy{WorkspaceID: tt.ws, OrganisationID: tt.org}
			if got := owned(p, tt.caller); got != tt.want {
				t.Fatalf("owned = %v, want %v", got, tt.want)
			}
		})
	}
}
