package usersapi

import (
	"context"
	"testing"

	"github.com/google/uuid"

	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// TestUsersAPI: the users module alone (cptest): routes × scopes ×
// tenancy, with users recorded in three workspaces of two organisations.
func TestUsersAPI(t *testing.T) {
	e := cp.New(t, "users", nil)
	store := e.App.KeyStore()
	user := func(sub, ws, org string) *identity.Caller {
		return &identity.Caller{KeyID: uuid.NewSHA1(uuid.NameSpaceURL, []byte(sub)).String(), Name: identity.UserPrefix + sub,
			Source: identity.SourceOIDC, Type: identity.TypeWorkspace, WorkspaceID: ws, OrganisationID: org, Scopes: []string{"completions.write"}}
	}
	alice, bob, eve := user("alice", cp.Workspace, cp.Org), user("bob", cp.Workspace2, cp.Org), user("eve", cp.OtherWS, cp.OtherOrg)
	for _, u := range []*identity.Caller{alice, bob, eve} {
		if err := store.SeeUser(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.DisableUser(context.Background(), bob.KeyID, "token_not_allowed"); err != nil {
		t.Fatal(err)
	}
	e.Run(t, []cp.Case{
		{Name: "workspace key: its workspace", Key: cp.Member, Method: "GET", Path: "/v1/users", Status: 200, Contains: `"name":"user:alice"`, Lacks: "user:bob"},
		{Name: "workspace key: one user", Key: cp.Member, Method: "GET", Path: "/v1/users/" + alice.KeyID, Status: 200, Contains: `"status":"active"`},
		{Name: "workspace key: another workspace's user", Key: cp.Member, Method: "GET", Path: "/v1/users/" + bob.KeyID, Status: 404},
		{Name: "org key: its organisation", Key: cp.Admin, Method: "GET", Path: "/v1/users", Status: 200, Contains: `"total":2`, Lacks: "user:eve"},
		{Name: "org key: disabled", Key: cp.Admin, Method: "GET", Path: "/v1/users?status=disabled", Status: 200, Contains: `"status_reason":"token_not_allowed"`, Lacks: "user:alice"},
		{Name: "org key: search", Key: cp.Admin, Method: "GET", Path: "/v1/users?search=ALI", Status: 200, Contains: "user:alice", Lacks: "user:bob"},
		{Name: "org key: one workspace", Key: cp.Admin, Method: "GET", Path: "/v1/users?workspace_id=" + cp.Workspace2, Status: 200, Contains: "user:bob", Lacks: "user:alice"},
		{Name: "org key: paged", Key: cp.Admin, Method: "GET", Path: "/v1/users?page_size=1&current_page=1", Status: 200, Contains: "user:bob", Lacks: "user:alice"},
		{Name: "another organisation's user", Key: cp.Admin, Method: "GET", Path: "/v1/users/" + eve.KeyID, Status: 404},
		{Name: "another organisation's admin", Key: cp.Outsider, Method: "GET", Path: "/v1/users", Status: 200, Contains: "user:eve", Lacks: "user:alice"},
		{Name: "no scope", Key: cp.Reader, Method: "GET", Path: "/v1/users", Status: 403, Code: "missing_scope"},
		{Name: "no scope for one", Key: cp.Reader, Method: "GET", Path: "/v1/users/" + alice.KeyID, Status: 403, Code: "missing_scope"},
		{Name: "bad status", Key: cp.Admin, Method: "GET", Path: "/v1/users?status=gone", Status: 400},
		{Name: "bad page size", Key: cp.Admin, Method: "GET", Path: "/v1/users?page_size=1000", Status: 400},
		{Name: "unknown user", Key: cp.Admin, Method: "GET", Path: "/v1/users/nobody", Status: 404},
		{Name: "no key", Key: "", Method: "GET", Path: "/v1/users", Status: 401},
	})
}
