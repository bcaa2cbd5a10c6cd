package budgetapi

import (
	"testing"

	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
)

const limitBody = `{"name":"team","type":"cost","credit_limit":10,"periodic_reset":"monthly","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]`

// TestUsageLimitsAPI: the usage-limits module alone (cptest): routes ×
// scopes × tenancy.
func TestUsageLimitsAPI(t *testing.T) {
	e := cp.New(t, "usage_limits", nil)
	w := e.Do(cp.Member, "POST", "/v1/policies/usage-limits", limitBody+`}`)
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	id := cp.Field(w, "id")
	item := "/v1/policies/usage-limits/" + id
	e.Run(t, []cp.Case{
		{Name: "read own", Key: cp.Member, Method: "GET", Path: item, Status: 200, Contains: `"team"`},
		{Name: "org admin reads it", Key: cp.Admin, Method: "GET", Path: item, Status: 200},
		{Name: "other workspace: not found", Key: cp.Member2, Method: "GET", Path: item, Status: 404, Code: "policy_not_found"},
		{Name: "other organisation: not found", Key: cp.Outsider, Method: "GET", Path: item, Status: 404},
		{Name: "outsider cannot delete it", Key: cp.Outsider, Method: "DELETE", Path: item, Status: 404},
		{Name: "no scope: 403 before lookup", Key: cp.Reader, Method: "GET", Path: "/v1/policies/usage-limits/nope", Status: 403, Code: "missing_scope"},
		{Name: "no scope to create", Key: cp.Reader, Method: "POST", Path: "/v1/policies/usage-limits", Body: limitBody + `}`, Status: 403},
		{Name: "list own", Key: cp.Member, Method: "GET", Path: "/v1/policies/usage-limits", Status: 200, Contains: id},
		{Name: "list of another workspace", Key: cp.Member2, Method: "GET", Path: "/v1/policies/usage-limits", Status: 200, Lacks: id},
		{Name: "workspace key names another workspace", Key: cp.Member, Method: "GET", Path: "/v1/policies/usage-limits?workspace_id=" + cp.Workspace2, Status: 403, Code: "workspace_forbidden"},
		{Name: "org key lists its organisation", Key: cp.Admin, Method: "GET", Path: "/v1/policies/usage-limits", Status: 200, Contains: id},
		{Name: "org key names another organisation's workspace", Key: cp.Admin, Method: "GET", Path: "/v1/policies/usage-limits?workspace_id=" + cp.OtherWS, Status: 403, Code: "workspace_forbidden"},
		{Name: "org key creates in another organisation's workspace", Key: cp.Admin, Method: "POST", Path: "/v1/policies/usage-limits", Body: limitBody + `,"workspace_id":"` + cp.OtherWS + `"}`, Status: 403, Code: "workspace_forbidden"},
		{Name: "org key creates in its other workspace", Key: cp.Admin, Method: "POST", Path: "/v1/policies/usage-limits", Body: limitBody + `,"workspace_id":"` + cp.Workspace2 + `"}`, Status: 200},
		{Name: "workspace key creates in another workspace", Key: cp.Member, Method: "POST", Path: "/v1/policies/usage-limits", Body: limitBody + `,"workspace_id":"` + cp.Workspace2 + `"}`, Status: 400},
		{Name: "outsider's list", Key: cp.Outsider, Method: "GET", Path: "/v1/policies/usage-limits", Status: 200, Lacks: id},
		{Name: "usage report", Key: cp.Member, Method: "GET", Path: "/v1/policies/usage-limits/usage", Status: 200, Contains: `"object":"list"`},
		{Name: "duplicate member", Key: cp.Member, Method: "POST", Path: "/v1/policies/usage-limits", Body: `{"name":"a","name":"b"}`, Status: 400},
		{Name: "update", Key: cp.Member, Method: "PUT", Path: item, Body: limitBody + `}`, Status: 200},
		{Name: "delete", Key: cp.Member, Method: "DELETE", Path: item, Status: 200, Contains: `"deleted":true`},
		{Name: "gone", Key: cp.Member, Method: "GET", Path: item, Status: 404},
	})
}
