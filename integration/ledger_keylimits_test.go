package integration

import (
	"strings"
	"testing"
)

// TestKeyUsageLimitsAreEnforced: the usage_limits of an API key created
// through the keys API is a budget on that key: requests of 3.15
// micro-dollars pass until its 20 micro-dollars are spent (seven, the
// last on what was left, charged to the nano-dollar), then 412.
func TestKeyUsageLimitsAreEnforced(t *testing.T) {
	up := newFakeOpenAI(t)
	s := newKeysSite(t, vkOpenAI("openai", up.URL))
	newHTTPPort()
	// Put llm_ratelimit, which enforces budgets, in front of the gateway.
	cf := strings.Replace(s.caddyfile(), "llm_gateway {", "llm_ratelimit\n\t\tllm_gateway {", 1)
	loadCaddyfile(t, cf)
	var created createdKey
	as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
		`{"name":"budgeted","workspace_id":"`+keysWorkspace+`","scopes":["completions.write"],"usage_limits":{"credit_limit":0.00002,"periodic_reset":"monthly"},"defaults":{"virtual_key":"openai"}}`,
		200, &created)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	ok := 0
	var last []byte
	for i := 0; i < 20; i++ {
		resp, raw := do(t, "POST", "/chat/completions", []byte(body), "x-gateway-api-key", created.Key)
		if resp.StatusCode != 200 {
			if resp.StatusCode != 412 {
				t.Fatalf("request %d: %d %s", i, resp.StatusCode, raw)
			}
			last = raw
			break
		}
		ok++
	}
	if want := passesOn(tinyBudgetNano, rlChatNano); ok != want || errCode(t, last) != "budget_exceeded" {
		t.Errorf("%d requests passed before %s, want %d then budget_exceeded", ok, last, want)
	}
	// The workspace's other key is not limited by this key's budget.
	if resp, raw := do(t, "POST", "/chat/completions", []byte(body), "x-gateway-virtual-key", "openai"); resp.StatusCode != 200 {
		t.Errorf("another key: %d %s", resp.StatusCode, raw)
	}
}
