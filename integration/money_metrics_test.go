package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
)

// refusalSeries is the series of one refusal reason.
func refusalSeries(reason string) string {
	return `llm_gateway_refusals_total{reason="` + reason + `"}`
}

// refusalDeltas returns how much each refusal reason grew between two
// scrapes.
func refusalDeltas(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, r := range observe.RefusalReasons {
		out[r] = after[refusalSeries(r)] - before[refusalSeries(r)]
	}
	return out
}

// wantRefusals fails unless the reasons grew by want (and every other
// reason not at all).
func wantRefusals(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for _, r := range observe.RefusalReasons {
		if got[r] != want[r] {
			t.Errorf("%s grew by %v, want %v", refusalSeries(r), got[r], want[r])
		}
	}
}

// noSecretsIn fails when a scrape holds a key.
func noSecretsIn(t *testing.T, scrape map[string]float64) {
	t.Helper()
	for k := range scrape {
		for _, secret := range []string{gatewayKey, rlSecondKey, rlOtherKey, "sk-test-provider"} {
			if strings.Contains(k, secret) {
				t.Fatalf("a key in series %s", k)
			}
		}
	}
}

// TestMoneyMetrics spends a tokens budget until llm_ratelimit refuses it
// (412), hits a rate limit (429) and has a guardrail deny (446), then
// reads the admin /metrics: each refusal reason counted once, and the
// budget's group with the expected limit, used and remaining. A budget
// spent on a route without llm_ratelimit is refused by llm_gateway's own
// budget stage, and counted once too; with Redis unreachable and
// failing closed, llm_ratelimit's 503 is a store_unavailable refusal.
func TestMoneyMetrics(t *testing.T) {
	up := newFakeOpenAI(t)
	storage := storageDir(t)
	loadRL(t, rlSite{Storage: storage})
	before := scrapeMetrics(t)
	for _, r := range observe.RefusalReasons {
		if _, ok := before[refusalSeries(r)]; !ok {
			t.Errorf("no series for refusal reason %s before any refusal", r)
		}
	}

	// 30 tokens for each value of metadata.budget; each answer uses 12
	// (9 prompt, 3 completion), so three pass (the third reserves the 6
	// left and is charged its 12: 36 used) and the fourth is refused.
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{
		"name": "money-tokens", "type": "tokens", "credit_limit": 30,
		"conditions": [{"key": "metadata.budget", "value": "*"}], "group_by": [{"key": "metadata.budget"}]}`)
	if status != 200 {
		t.Fatalf("create usage limit: %d %v", status, m)
	}
	budgetID := m["id"].(string)
	createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":1,"conditions":[{"key":"metadata.rl","value":"*"}],"group_by":[{"key":"api_key"}]}`)

	spend := func(want int) {
		t.Helper()
		resp, raw := rlChat(t, gatewayURL(), rlSecondKey, up.URL, "", "x-gateway-metadata", `{"budget":"money"}`)
		if resp.StatusCode != want {
			t.Fatalf("budget request: %d %s, want %d", resp.StatusCode, raw, want)
		}
	}
	for i := 0; i < 3; i++ {
		spend(200)
	}
	spend(http.StatusPreconditionFailed)
	for i, want := range []int{200, http.StatusTooManyRequests} {
		if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "", "x-gateway-metadata", `{"rl":"x"}`); resp.StatusCode != want {
			t.Fatalf("rate-limited request %d: %d %s, want %d", i, resp.StatusCode, raw, want)
		}
	}
	deny := target(up, `"input_guardrails":[{"default.regexMatch":{"rule":"hi","not":true},"deny":true}]`)
	if resp, raw := rawDo(t, gatewayURL(), http.MethodPost, "/chat/completions", []byte(chatBody),
		"x-gateway-api-key", gatewayKey, "x-gateway-config", compactJSON(t, deny)); resp.StatusCode != 446 {
		t.Fatalf("guardrail request: %d %s, want 446", resp.StatusCode, raw)
	}
	// A request refused for its key is no spend, but a refusal too.
	if resp, _ := rlChat(t, gatewayURL(), "not-a-key", up.URL, ""); resp.StatusCode != 401 {
		t.Fatalf("unknown key: %d, want 401", resp.StatusCode)
	}

	after := scrapeMetrics(t)
	wantRefusals(t, refusalDeltas(before, after), map[string]float64{
		observe.RefusalBudgetExhausted: 1, observe.RefusalRateLimited: 1, observe.RefusalGuardrailDenied: 1,
		observe.RefusalUnauthenticated: 1,
	})
	lv := `{group="metadata.budget=money",policy_id="` + budgetID + `",type="tokens"}`
	for name, want := range map[string]float64{"llm_gateway_budget_limit": 30, "llm_gateway_budget_used": 36, "llm_gateway_budget_remaining": 0} {
		if got, ok := after[name+lv]; !ok || got != want {
			t.Errorf("%s%s = %v (present %v), want %v", name, lv, got, ok, want)
		}
	}
	for k := range after {
		if strings.HasPrefix(k, "llm_gateway_budget_") && !strings.Contains(k, `policy_id="`+budgetID+`"`) {
			t.Errorf("a budget series of no limit this test made: %s", k)
		}
	}
	noSecretsIn(t, after)

	// Without llm_ratelimit, llm_gateway's budget stage refuses the spent
	// budget (the same counters: the storage is the same); its log entry
	// counts the refusal once.
	loadRL(t, rlSite{NoLimiter: true, Storage: storage})
	before = scrapeMetrics(t)
	spend(http.StatusPreconditionFailed)
	after = scrapeMetrics(t)
	wantRefusals(t, refusalDeltas(before, after), map[string]float64{observe.RefusalBudgetExhausted: 1})
	if got := after[`llm_gateway_budget_remaining`+lv]; got != 0 || after[`llm_gateway_budget_used`+lv] != 36 {
		t.Errorf("after the reload: remaining %v, used %v; want 0 and 36", got, after[`llm_gateway_budget_used`+lv])
	}
	noSecretsIn(t, after)

	// A policy's counters in a Redis that does not answer, failing
	// closed: llm_ratelimit's 503 is a store_unavailable refusal.
	dead := fmt.Sprintf("127.0.0.1:%d", freePort())
	loadRL(t, rlSite{Limit: "policy money-" + uuid.NewString() + " {\n\t\t\ttype requests\n\t\t\tunit rpm\n\t\t\tvalue 100\n\t\t}",
		Redis: "redis " + dead + " {\n\t\t\tfail_closed\n\t\t}"})
	before = scrapeMetrics(t)
	if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Redis unreachable, failing closed: %d %s, want 503", resp.StatusCode, raw)
	}
	wantRefusals(t, refusalDeltas(before, scrapeMetrics(t)), map[string]float64{observe.RefusalStoreUnavailable: 1})
}
