package keysapi

import (
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	cp "github.com/caddy-llm-gateway/caddy-llm-gateway/controlplane/cptest"
)

// TestKeysAPI: the keys module alone (cptest): routes × scopes × tenancy.
func TestKeysAPI(t *testing.T) {
	e := cp.New(t, "keys", nil)
	w := e.Do(cp.Member, "POST", "/v1/api-keys/workspace/service", `{"name":"svc","scopes":["completions.write"]}`)
	if w.Code != 200 {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	id, secret := cp.Field(w, "id"), cp.Field(w, "key")
	w = e.Do(cp.Member, "POST", "/v1/configs", `{"name":"c1","config":{"retry":{"attempts":2}}}`)
	if w.Code != 200 {
		t.Fatalf("config: %d %s", w.Code, w.Body)
	}
	slug := cp.Field(w, "slug")
	e.Run(t, []cp.Case{
		{Name: "no key", Method: "GET", Path: "/v1/api-keys", Status: 401},
		{Name: "unknown key", Key: "nope", Method: "GET", Path: "/v1/api-keys", Status: 401, Code: "invalid_api_key"},
		{Name: "read own", Key: cp.Member, Method: "GET", Path: "/v1/api-keys/" + id, Status: 200, Contains: `"name":"svc"`, Lacks: secret},
		{Name: "list own workspace", Key: cp.Member, Method: "GET", Path: "/v1/api-keys", Status: 200, Contains: `"svc"`, Lacks: secret},
		{Name: "org admin reads its workspace's key", Key: cp.Admin, Method: "GET", Path: "/v1/api-keys/" + id, Status: 200},
		{Name: "other workspace: not found", Key: cp.Member2, Method: "GET", Path: "/v1/api-keys/" + id, Status: 404},
		{Name: "other organisation: not found", Key: cp.Outsider, Method: "GET", Path: "/v1/api-keys/" + id, Status: 404},
		{Name: "other organisation's config", Key: cp.Outsider, Method: "GET", Path: "/v1/configs/" + slug, Status: 404},
		{Name: "no scope: 403 before lookup", Key: cp.Reader, Method: "GET", Path: "/v1/api-keys/00000000-0000-0000-0000-000000000000", Status: 403, Code: "missing_scope"},
		{Name: "no scope to list configs", Key: cp.Reader, Method: "GET", Path: "/v1/configs", Status: 403},
		{Name: "workspace key names another workspace", Key: cp.Member, Method: "GET", Path: "/v1/api-keys?workspace_id=" + cp.Workspace2, Status: 403, Code: "workspace_forbidden"},
		{Name: "org key names another organisation's workspace", Key: cp.Admin, Method: "GET", Path: "/v1/api-keys?workspace_id=" + cp.OtherWS, Status: 403, Code: "workspace_forbidden"},
		{Name: "org key lists its other workspace", Key: cp.Admin, Method: "GET", Path: "/v1/api-keys?workspace_id=" + cp.Workspace2, Status: 200, Lacks: `"svc"`},
		{Name: "duplicate member", Key: cp.Member, Method: "POST", Path: "/v1/configs", Body: `{"name":"a","name":"b","config":{}}`, Status: 400},
		{Name: "outsider cannot change it", Key: cp.Outsider, Method: "PUT", Path: "/v1/api-keys/" + id, Body: `{"name":"x"}`, Status: 404},
		{Name: "wrong method", Key: cp.Member, Method: "PATCH", Path: "/v1/api-keys/" + id, Status: 405},
		{Name: "audit log", Key: cp.Member, Method: "GET", Path: "/v1/audit-logs", Status: 200, Contains: `"api_key.create"`},
		{Name: "outsider's audit log", Key: cp.Outsider, Method: "GET", Path: "/v1/audit-logs", Status: 200, Lacks: id},
		{Name: "delete", Key: cp.Member, Method: "DELETE", Path: "/v1/api-keys/" + id, Status: 200},
		{Name: "another module's path: not loaded, not served", Key: cp.Member, Method: "GET", Path: "/v1/prompts", Status: 404},
		{Name: "revoked key authenticates no more", Key: secret, Method: "GET", Path: "/v1/api-keys", Status: 401},
	})
}

// The llm app is the Gateway the module serves.
var _ Gateway = (*app.App)(nil)
