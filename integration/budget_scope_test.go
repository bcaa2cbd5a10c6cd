package integration

import (
	"net/http"
	"strings"
	"testing"
)

// TestBudgetAPIScopes: the usage-limits API answers only keys holding the
// usage_limits scope of the action (a read-only key gets 403 on every
// write, a key without the scopes on every call), and only within the
// caller's workspace: another workspace's limits are not found, and a
// workspace key can neither list nor create in another workspace; an
// organisation key sees every workspace of its organisation.
func TestBudgetAPIScopes(t *testing.T) {
	s := newKeysSite(t, "")
	s.load(t)
	newKey := func(name, ws, scopes string) string {
		var created createdKey
		as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
			`{"name":"`+name+`","workspace_id":"`+ws+`","scopes":`+scopes+`}`, 200, &created)
		return created.Key
	}
	reader := newKey("limits-reader", keysWorkspace, `["usage_limits.read"]`)
	unscoped := newKey("no-limits", keysWorkspace, `["completions.write"]`)
	otherWriter := newKey("other-writer", keysOtherWS, `["usage_limits.*"]`)

	var own, other struct {
		ID string `json:"id"`
	}
	// The Caddyfile's workspace key, without scopes, administers its
	// own workspace.
	as(t, gatewayKey, "POST", "/policies/usage-limits", tinyBudget, 200, &own)
	as(t, otherWriter, "POST", "/policies/usage-limits", tinyBudget, 200, &other)
	ownPath, otherPath := "/policies/usage-limits/"+own.ID, "/policies/usage-limits/"+other.ID
	update := strings.Replace(tinyBudget, "0.00002", "5", 1)

	for _, tc := range []struct {
		name         string
		key          string
		method, path string
		body         string
		status       int
		code         string // the error code, for refusals
		sees, hides  string // ids a 200 answer must and must not hold
	}{
		{"reader lists its workspace", reader, "GET", "/policies/usage-limits", "", 200, "", own.ID, other.ID},
		{"reader reads a limit", reader, "GET", ownPath, "", 200, "", own.ID, ""},
		{"reader cannot create", reader, "POST", "/policies/usage-limits", tinyBudget, 403, "missing_scope", "", ""},
		{"reader cannot update", reader, "PUT", ownPath, update, 403, "missing_scope", "", ""},
		{"reader cannot delete", reader, "DELETE", ownPath, "", 403, "missing_scope", "", ""},
		{"reader does not find another workspace's limit", reader, "GET", otherPath, "", 404, "policy_not_found", "", ""},
		{"a key without the scopes cannot list", unscoped, "GET", "/policies/usage-limits", "", 403, "missing_scope", "", ""},
		{"a key without the scopes cannot read", unscoped, "GET", ownPath, "", 403, "missing_scope", "", ""},
		{"another workspace does not find the limit", otherWriter, "GET", ownPath, "", 404, "policy_not_found", "", ""},
		{"another workspace cannot update it", otherWriter, "PUT", ownPath, update, 404, "policy_not_found", "", ""},
		{"another workspace cannot delete it", otherWriter, "DELETE", ownPath, "", 404, "policy_not_found", "", ""},
		{"another workspace lists only its own", otherWriter, "GET", "/policies/usage-limits", "", 200, "", other.ID, own.ID},
		{"another workspace cannot list this one", otherWriter, "GET", "/policies/usage-limits?workspace_id=" + keysWorkspace, "", 403, "workspace_forbidden", "", ""},
		{"another workspace cannot create in this one", otherWriter, "POST", "/policies/usage-limits",
			strings.Replace(tinyBudget, `"name"`, `"workspace_id": "`+keysWorkspace+`", "name"`, 1), 400, "", "", ""},
		{"the organisation key lists every workspace", keysAdminKey, "GET", "/policies/usage-limits", "", 200, "", own.ID + " " + other.ID, ""},
		{"the organisation key lists one workspace", keysAdminKey, "GET", "/policies/usage-limits?workspace_id=" + keysOtherWS, "", 200, "", other.ID, own.ID},
		{"the organisation key reads any of its workspaces", keysAdminKey, "GET", otherPath, "", 200, "", other.ID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := string(as(t, tc.key, tc.method, tc.path, tc.body, tc.status, nil))
			if tc.code != "" && errCode(t, []byte(raw)) != tc.code {
				t.Errorf("error code %q, want %q: %s", errCode(t, []byte(raw)), tc.code, raw)
			}
			for _, id := range strings.Fields(tc.sees) {
				if !strings.Contains(raw, id) {
					t.Errorf("the answer lacks %s: %s", id, raw)
				}
			}
			if tc.hides != "" && strings.Contains(raw, tc.hides) {
				t.Errorf("the answer shows %s: %s", tc.hides, raw)
			}
		})
	}
	// The refused writes changed nothing.
	var got struct {
		CreditLimit float64 `json:"credit_limit"`
	}
	as(t, gatewayKey, "GET", ownPath, "", 200, &got)
	if got.CreditLimit != 0.00002 {
		t.Errorf("credit_limit %v after refused updates, want 0.00002", got.CreditLimit)
	}
	if resp, raw := do(t, http.MethodGet, ownPath, nil); resp.StatusCode != 200 {
		t.Errorf("the limit is gone after refused deletes: %d %s", resp.StatusCode, raw)
	}
}
