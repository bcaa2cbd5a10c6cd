package promptapi

import (
	"testing"

	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
)

const greetingBody = `{"name":"greeting","string":"[{\"role\":\"user\",\"content\":\"Hello {{name}}\"}]","model":"gpt-4o-mini"}`

// TestPromptsAPI: the prompts module alone (cptest): routes × scopes ×
// tenancy.
func TestPromptsAPI(t *testing.T) {
	e := cp.New(t, "prompts", map[string]any{"prompts": map[string]any{}})
	w := e.Do(cp.Member, "POST", "/v1/prompts", greetingBody)
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	id := cp.Field(w, "id")
	item := "/v1/prompts/" + id
	e.Run(t, []cp.Case{
		{Name: "read own", Key: cp.Member, Method: "GET", Path: item, Status: 200, Contains: `"greeting"`},
		{Name: "other workspace: not found", Key: cp.Member2, Method: "GET", Path: item, Status: 404},
		{Name: "other organisation: not found", Key: cp.Outsider, Method: "GET", Path: item, Status: 404},
		{Name: "outsider cannot delete it", Key: cp.Outsider, Method: "DELETE", Path: item, Status: 404},
		{Name: "no scope: 403 before lookup", Key: cp.Reader, Method: "GET", Path: "/v1/prompts/nope", Status: 403, Code: "missing_scope"},
		{Name: "no scope to render", Key: cp.Reader, Method: "POST", Path: item + "/render", Body: `{"variables":{"name":"x"}}`, Status: 403},
		{Name: "render", Key: cp.Member, Method: "POST", Path: item + "/render", Body: `{"variables":{"name":"Ada"}}`, Status: 200, Contains: "Hello Ada"},
		{Name: "list own", Key: cp.Member, Method: "GET", Path: "/v1/prompts", Status: 200, Contains: id},
		{Name: "list of another workspace", Key: cp.Member2, Method: "GET", Path: "/v1/prompts", Status: 200, Lacks: id},
		{Name: "workspace named beyond reach", Key: cp.Member, Method: "GET", Path: "/v1/prompts?workspace_id=" + cp.Workspace2, Status: 403, Code: "workspace_forbidden"},
		{Name: "versions", Key: cp.Member, Method: "GET", Path: item + "/versions", Status: 200},
		{Name: "duplicate member", Key: cp.Member, Method: "POST", Path: "/v1/prompts", Body: `{"name":"a","name":"b","string":"x"}`, Status: 400},
		{Name: "completions are not the API's", Key: cp.Member, Method: "POST", Path: item + "/completions", Body: `{}`, Status: 404},
		{Name: "delete", Key: cp.Member, Method: "DELETE", Path: item, Status: 200},
		{Name: "gone", Key: cp.Member, Method: "GET", Path: item, Status: 404},
	})
}
