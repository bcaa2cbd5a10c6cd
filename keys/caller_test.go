package keys

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// TestIdentityReach: a caller's scopes (identity.Caller.Can) and reach
// (Manages).
func TestIdentityReach(t *testing.T) {
	org, ws, other := "org", "ws", "ws2"
	tests := []struct {
		name  string
		id    identity.Caller
		scope string
		can   bool
		org   string
		ws    string
		reach bool
	}{
		{"Caddyfile key without scopes", identity.Caller{Source: SourceConfig, Type: TypeWorkspace, OrganisationID: org, WorkspaceID: ws}, "api_create", true, org, ws, true},
		{"not another workspace", identity.Caller{Source: SourceConfig, Type: TypeWorkspace, OrganisationID: org, WorkspaceID: ws}, "configs.read", true, org, other, false},
		{"scoped Caddyfile key", identity.Caller{Source: SourceConfig, Scopes: []string{"configs.read"}, OrganisationID: org, WorkspaceID: ws}, "api_create", false, org, ws, true},
		{"API key without the scope", identity.Caller{Source: SourceAPI, Scopes: []string{"completions.write"}, OrganisationID: org, WorkspaceID: ws}, "api_read", false, org, ws, true},
		{"API key with no scopes at all", identity.Caller{Source: SourceAPI, OrganisationID: org, WorkspaceID: ws}, "api_read", false, org, ws, true},
		{"organisation key", identity.Caller{Source: SourceAPI, Type: TypeOrganisation, Scopes: []string{"*"}, OrganisationID: org, WorkspaceID: ws}, "api_delete", true, org, other, true},
		{"organisation key, other organisation", identity.Caller{Type: TypeOrganisation, Scopes: []string{"*"}, OrganisationID: org, WorkspaceID: ws}, "api_delete", true, "org2", other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.Can(tt.scope); got != tt.can {
				t.Errorf("Can(%s) = %v", tt.scope, got)
			}
			if got := Manages(&tt.id, tt.org, tt.ws); got != tt.reach {
				t.Errorf("Manages(%s, %s) = %v", tt.org, tt.ws, got)
			}
		})
	}
}
