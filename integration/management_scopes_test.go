package integration

import (
	"net/http"
	"testing"
)

// TestManagementScopes: the rate-limit policy and prompt APIs answer only
// keys holding the scope of the action, as the keys and usage-limits APIs
// do. A key made for calling models (completions.write) can neither
// change its workspace's rate limits nor its prompts, and a read-only key
// reads but changes nothing; prompt completions stay open to every key.
func TestManagementScopes(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newKeysSite(t, "")
	s.load(t)
	newKey := func(name, scopes string) string {
		var created createdKey
		as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
			`{"name":"`+name+`","workspace_id":"`+keysWorkspace+`","scopes":`+scopes+`}`, 200, &created)
		return created.Key
	}
	reader := newKey("scopes-reader", `["rate_limits.read","prompts.read"]`)
	modelsOnly := newKey("scopes-models-only", `["completions.write"]`)

	var policy, prompt struct {
		ID string `json:"id"`
	}
	const policyBody = `{"type":"requests","unit":"rpm","value":100,"name":"scopes","conditions":[{"key":"metadata.scopes","value":"x"}],"group_by":[{"key":"api_key"}]}`
	as(t, gatewayKey, "POST", "/policies/rate-limits", policyBody, 200, &policy)
	as(t, gatewayKey, "POST", "/prompts", `{"name":"Scoped","string":"[{\"role\":\"user\",\"content\":\"say {{q}}\"}]","model":"gpt-4o-mini"}`, 200, &prompt)
	policyPath, promptPath := "/policies/rate-limits/"+policy.ID, "/prompts/"+prompt.ID

	for _, tc := range []struct {
		name         string
		key          string
		method, path string
		body         string
		status       int
	}{
		{"models-only key cannot create a rate limit", modelsOnly, "POST", "/policies/rate-limits", policyBody, 403},
		{"models-only key cannot list rate limits", modelsOnly, "GET", "/policies/rate-limits", "", 403},
		{"models-only key cannot raise a rate limit", modelsOnly, "PUT", policyPath, `{"value":100000}`, 403},
		{"models-only key cannot archive a rate limit", modelsOnly, "DELETE", policyPath, "", 403},
		{"models-only key cannot list prompts", modelsOnly, "GET", "/prompts", "", 403},
		{"models-only key cannot read a prompt", modelsOnly, "GET", promptPath, "", 403},
		{"models-only key cannot render a prompt", modelsOnly, "POST", promptPath + "/render", `{"variables":{"q":"x"}}`, 403},
		{"models-only key cannot change a prompt", modelsOnly, "PUT", promptPath, `{"name":"taken"}`, 403},
		{"reader lists rate limits", reader, "GET", "/policies/rate-limits", "", 200},
		{"reader reads a rate limit", reader, "GET", policyPath, "", 200},
		{"reader cannot create a rate limit", reader, "POST", "/policies/rate-limits", policyBody, 403},
		{"reader cannot raise a rate limit", reader, "PUT", policyPath, `{"value":100000}`, 403},
		{"reader cannot archive a rate limit", reader, "DELETE", policyPath, "", 403},
		{"reader lists prompts", reader, "GET", "/prompts", "", 200},
		{"reader reads a prompt's versions", reader, "GET", promptPath + "/versions", "", 200},
		{"reader cannot create a prompt", reader, "POST", "/prompts", `{"name":"x","string":"hi"}`, 403},
		{"reader cannot publish a version", reader, "PUT", promptPath + "/makeDefault", `{"version":1}`, 403},
		{"reader cannot delete a prompt", reader, "DELETE", promptPath, "", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := api(t, tc.key, tc.method, tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("%s %s: %d %v, want %d", tc.method, tc.path, status, m, tc.status)
			}
			if tc.status == 403 {
				if e, _ := m["error"].(map[string]any); e["code"] != "missing_scope" {
					t.Fatalf("403 without code missing_scope: %v", m)
				}
			}
		})
	}
	// The policy and the prompt are as they were.
	if _, p := api(t, gatewayKey, http.MethodGet, policyPath, ""); p["value"] != float64(100) || p["status"] != "active" {
		t.Fatalf("the policy changed: %v", p)
	}
	// Completing a prompt is inference: a models-only key may.
	resp, raw := do(t, "POST", promptPath+"/completions", []byte(`{"variables":{"q":"hi"}}`),
		"x-gateway-api-key", modelsOnly, "x-gateway-provider", "openai", "Authorization", "Bearer sk-test-provider", "x-gateway-custom-host", up.URL)
	if resp.StatusCode != 200 {
		t.Fatalf("a models-only key completing a prompt: %d %s", resp.StatusCode, raw)
	}
}
