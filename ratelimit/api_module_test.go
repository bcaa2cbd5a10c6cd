package ratelimit

import (
	"testing"

	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
)

const policyBody = `{"type":"requests","unit":"rpm","value":100,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]`

// TestRateLimitsAPI: the rate-limits module alone (cptest): routes ×
// scopes × tenancy.
func TestRateLimitsAPI(t *testing.T) {
	e := cp.New(t, "rate_limits", nil)
	w := e.Do(cp.Member, "POST", "/v1/policies/rate-limits", policyBody+`}`)
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	id := cp.Field(w, "id")
	item := "/v1/policies/rate-limits/" + id
	e.Run(t, []cp.Case{
		{Name: "read own", Key: cp.Member, Method: "GET", Path: item, Status: 200, Contains: id},
		{Name: "other workspace: not found", Key: cp.Member2, Method: "GET", Path: item, Status: 404, Code: "policy_not_found"},
		{Name: "other organisation: not found", Key: cp.Outsider, Method: "GET", Path: item, Status: 404},
		{Name: "outsider cannot change it", Key: cp.Outsider, Method: "PUT", Path: item, Body: `{"value":1}`, Status: 404},
		{Name: "no scope: 403 before lookup", Key: cp.Reader, Method: "GET", Path: "/v1/policies/rate-limits/00000000-0000-0000-0000-000000000000", Status: 403, Code: "missing_scope"},
		{Name: "no scope to create", Key: cp.Reader, Method: "POST", Path: "/v1/policies/rate-limits", Body: policyBody + `}`, Status: 403},
		{Name: "not a UUID", Key: cp.Member, Method: "GET", Path: "/v1/policies/rate-limits/x", Status: 400},
		{Name: "list own", Key: cp.Member, Method: "GET", Path: "/v1/policies/rate-limits", Status: 200, Contains: id},
		{Name: "list of another workspace", Key: cp.Member2, Method: "GET", Path: "/v1/policies/rate-limits", Status: 200, Lacks: id},
		{Name: "create in another workspace", Key: cp.Member, Method: "POST", Path: "/v1/policies/rate-limits", Body: policyBody + `,"workspace_id":"` + cp.Workspace2 + `"}`, Status: 400},
		{Name: "create in another organisation", Key: cp.Member, Method: "POST", Path: "/v1/policies/rate-limits", Body: policyBody + `,"organisation_id":"` + cp.OtherOrg + `"}`, Status: 400},
		{Name: "my usage", Key: cp.Member, Method: "GET", Path: "/v1/policies/rate-limits/usage", Status: 200, Contains: id},
		{Name: "usage of one group", Key: cp.Member, Method: "GET", Path: item + "/usage?api_key=" + cp.Member, Status: 200},
		{Name: "update", Key: cp.Member, Method: "PUT", Path: item, Body: `{"value":5}`, Status: 200, Contains: `"value":5`},
		{Name: "archive", Key: cp.Member, Method: "DELETE", Path: item, Status: 200, Contains: `"archived"`},
		{Name: "archived is not active", Key: cp.Member, Method: "GET", Path: item, Status: 404},
		{Name: "wrong method", Key: cp.Member, Method: "PATCH", Path: item, Status: 405},
	})
}
