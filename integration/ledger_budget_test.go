package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBudgetEndToEnd creates a usage limit through the API and spends it
// through the gateway: requests of 3.15 micro-dollars each against a 20
// micro-dollar budget, reserving at most what remains, pass until the
// budget is spent (seven, charged to the nano-dollar); the next is a 412
// budget_exceeded in the envelope; a key in another workspace is not
// limited; deleting the limit lifts it.
func TestBudgetEndToEnd(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{})
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{
		"name": "tiny", "type": "cost", "credit_limit": 0.00002, "periodic_reset": "monthly", "timezone": "Europe/Amsterdam",
		"conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}]}`)
	if status != 200 || m["object"] != "policy_usage_limits" {
		t.Fatalf("create: %d %v", status, m)
	}
	id := m["id"].(string)
	ok := 0
	var last *http.Response
	var raw []byte
	for i := 0; i < 20; i++ {
		last, raw = rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
		if last.StatusCode != 200 {
			break
		}
		ok++
		if last.Header.Get("X-Gateway-Budget-Policy") != id || last.Header.Get("X-Gateway-Budget-Remaining") == "" ||
			last.Header.Get("X-Gateway-Budget-Reset") == "" {
			t.Errorf("request %d: budget headers %v", i, last.Header)
		}
	}
	if want := passesOn(tinyBudgetNano, rlChatNano); ok != want || last.StatusCode != http.StatusPreconditionFailed || last.Header.Get("x-gateway-error") != "true" {
		t.Fatalf("%d requests passed, then %d %s; want %d then 412", ok, last.StatusCode, raw, want)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	if errField(env, "code") != "budget_exceeded" {
		t.Errorf("refusal code %q, want budget_exceeded", errField(env, "code"))
	}
	// The key's own view: the limit is spent, and resets at the start
	// of next month in Amsterdam.
	var me struct {
		UsageLimits []struct {
			PolicyID  string  `json:"policy_id"`
			Used      float64 `json:"used"`
			Remaining float64 `json:"remaining"`
			PeriodEnd string  `json:"period_end"`
		} `json:"usage_limits"`
	}
	resp, raw := rawDo(t, gatewayURL(), http.MethodGet, "/usage/me", nil, "x-gateway-api-key", gatewayKey)
	if err := json.Unmarshal(raw, &me); err != nil || resp.StatusCode != 200 || len(me.UsageLimits) != 1 ||
		me.UsageLimits[0].PolicyID != id || me.UsageLimits[0].Remaining != 0 || me.UsageLimits[0].Used < 0.00002 ||
		!strings.HasSuffix(me.UsageLimits[0].PeriodEnd, "+02:00") && !strings.HasSuffix(me.UsageLimits[0].PeriodEnd, "+01:00") {
		t.Errorf("usage/me: %d %s", resp.StatusCode, raw)
	}
	if resp, raw := rlChat(t, gatewayURL(), rlOtherKey, up.URL, ""); resp.StatusCode != 200 {
		t.Errorf("another workspace's key: %d %s", resp.StatusCode, raw)
	}
	// The other workspace cannot see or delete the limit.
	if status, _ := api(t, rlOtherKey, http.MethodGet, "/policies/usage-limits/"+id, ""); status != 404 {
		t.Errorf("other workspace GET: %d, want 404", status)
	}
	if status, m := api(t, gatewayKey, http.MethodGet, "/policies/usage-limits", ""); status != 200 || m["total"] != float64(1) {
		t.Errorf("list: %d %v", status, m)
	}
	if status, m := api(t, gatewayKey, http.MethodDelete, "/policies/usage-limits/"+id, ""); status != 200 {
		t.Fatalf("delete: %d %v", status, m)
	}
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != 200 {
		t.Errorf("after deleting the limit: %d %s", resp.StatusCode, raw)
	}
}

func TestBudgetAPIRefusesBadLimits(t *testing.T) {
	loadRL(t, rlSite{})
	for _, tc := range []struct{ body, param string }{
		{`{"type":"cost","credit_limit":-1,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`, "credit_limit"},
		{`{"type":"requests","credit_limit":1,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`, "type"},
		{`{"type":"cost","credit_limit":1,"periodic_reset":"daily","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`, "periodic_reset"},
		{`{"type":"cost","credit_limit":1,"timezone":"Nowhere/Else","conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]}`, "timezone"},
		{`{"type":"cost","credit_limit":1,"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}],"workspace_id":"` + rlOtherWS + `"}`, "workspace_id"},
		{`{"type":"cost","credit_limit":"1"}`, "body"},
	} {
		status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", tc.body)
		if status != 400 || errParam(m) != tc.param {
			t.Errorf("%s: %d %v; want 400 on %s", tc.body, status, m, tc.param)
		}
	}
}
