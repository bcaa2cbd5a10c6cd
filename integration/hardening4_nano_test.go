package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// Issue 34, "budget counters in nano-dollars": a cost usage limit counts
// what the ledger counts, to the nano-dollar, and a gateway upgraded in
// the middle of a period carries over what the older version counted in
// whole micro-dollars.

// budgetStatus is one usage limit of GET /v1/usage/me.
type budgetStatus struct {
	PolicyID    string  `json:"policy_id"`
	CreditLimit float64 `json:"credit_limit"`
	Used        float64 `json:"used"`
	Remaining   float64 `json:"remaining"`
}

// usageOf returns where key's usage limit id stands, from GET
// /v1/usage/me.
func usageOf(t *testing.T, key, id string) budgetStatus {
	t.Helper()
	var me struct {
		UsageLimits []budgetStatus `json:"usage_limits"`
	}
	resp, raw := rawDo(t, gatewayURL(), http.MethodGet, "/usage/me", nil, "x-gateway-api-key", key)
	if err := json.Unmarshal(raw, &me); err != nil || resp.StatusCode != 200 {
		t.Fatalf("usage/me: %d %s", resp.StatusCode, raw)
	}
	for _, s := range me.UsageLimits {
		if s.PolicyID == id {
			return s
		}
	}
	t.Fatalf("usage/me has no limit %s: %s", id, raw)
	return budgetStatus{}
}

// createLimit creates a usage limit through the API, deleted with the
// test along with its counters and markers in rdb, and returns it
// prepared, as the gateway enforces it.
func createLimit(t *testing.T, rdb *redis.Client, body string) *budgets.UsageLimit {
	t.Helper()
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", body)
	if status != 200 {
		t.Fatalf("usage limit: %d %v", status, m)
	}
	id, _ := m["id"].(string)
	t.Cleanup(func() {
		api(t, gatewayKey, http.MethodDelete, "/policies/usage-limits/"+id, "")
		ctx := context.Background()
		for it := rdb.Scan(ctx, 0, "*"+id+"*", 1000).Iterator(); it.Next(ctx); {
			rdb.Del(ctx, it.Val())
		}
	})
	// The creation answers the id; the record is read back.
	if status, m = api(t, gatewayKey, http.MethodGet, "/policies/usage-limits/"+id, ""); status != 200 || id == "" {
		t.Fatalf("usage limit %q: %d %v", id, status, m)
	}
	raw, _ := json.Marshal(m)
	u, err := budgets.Parse(raw)
	if err == nil {
		err = u.Prepare()
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestHardening4CounterEqualsLedger: through a real Caddy with Redis and
// the ledger, requests whose costs are fractions of a micro-dollar (2.25,
// 3.3, 4.35, 5.4 and 6.45 µ$ as JSON, 3.15 µ$ streamed) leave the
// budget's used equal to the sum of their ledger records to the
// nano-dollar, and remaining the limit less that sum. Before, each was
// charged in whole micro-dollars rounded up (29 µ$ for 24.9 µ$).
func TestHardening4CounterEqualsLedger(t *testing.T) {
	rdb := requireRedis(t)
	up := newFakeOpenAI(t)
	var n atomic.Int64
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" || strings.Contains(string(body), `"stream":true`) {
			return false
		}
		i := n.Add(1) - 1
		// gpt-4o-mini: 150 n$ a prompt token, 600 a completion token.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, 7+3*i, 2+i, 9+4*i)
		return true
	}
	loadRL(t, rlSite{Redis: redisBlock(false) + fmt.Sprintf("\n\t\tledger %q", filepath.Join(t.TempDir(), "ledger.db"))})
	u := createLimit(t, rdb, strings.Replace(tinyBudget, "0.00002", "1", 1))

	for i := range 5 {
		resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
		if want := int64(2_250 + 1_050*i); resp.StatusCode != 200 || costNano(t, resp.Header.Get("X-Gateway-Cost")) != want {
			t.Fatalf("request %d: %d %s, cost %q; want 200 costing %d n$", i, resp.StatusCode, raw, resp.Header.Get("X-Gateway-Cost"), want)
		}
	}
	resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "[DONE]") {
		t.Fatalf("stream: %d %s", resp.StatusCode, raw)
	}

	syncLedger(t)
	var logs struct {
		Data []struct {
			APIKey string `json:"api_key"`
			Cost   int64  `json:"cost_nano_usd"`
			Known  bool   `json:"cost_known"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100", gatewayKey, &logs); code != 200 || len(logs.Data) != 6 {
		t.Fatalf("GET /v1/logs: %d, %d records, want 6", code, len(logs.Data))
	}
	var ledgerNano, roundedUp int64
	for _, l := range logs.Data {
		if !l.Known || l.Cost <= 0 {
			t.Fatalf("record %+v, want a known cost", l)
		}
		ledgerNano += l.Cost
		roundedUp += (l.Cost + 999) / 1000 * 1000
	}
	if ledgerNano == roundedUp {
		t.Fatalf("the records cost %d n$, whole micro-dollars: the test would not tell nano from micro counting", ledgerNano)
	}
	used := waitUsed(t, gatewayURL(), gatewayKey, ledgerNano)
	s := usageOf(t, gatewayKey, u.ID)
	t.Logf("ledger %d n$ over %d records, budget used %v (remaining %v); whole micro-dollars rounded up would be %d n$",
		ledgerNano, len(logs.Data), s.Used, s.Remaining, roundedUp)
	if used != ledgerNano || s.Used != float64(ledgerNano)/budgets.NanoPerUSD {
		t.Errorf("budget used %v (%d n$), want the ledger's %d n$ exactly", s.Used, used, ledgerNano)
	}
	if want := float64(u.Limit()-ledgerNano) / budgets.NanoPerUSD; s.Remaining != want {
		t.Errorf("budget remaining %v, want %v", s.Remaining, want)
	}
}

// TestHardening4LegacyCounterCarriedOver: a gateway of the older version
// counted 15 µ$ of a 20 µ$ budget this month, in whole micro-dollars
// under the old counter key. This version, on the same Redis, starts the
// budget's nano-dollar counter from it: two requests of 3.15 µ$ pass (the
// second on the 1.85 µ$ left), then the 412, and used is 21.3 µ$. Had
// the old count been lost (or read as nano-dollars), seven would pass.
func TestHardening4LegacyCounterCarriedOver(t *testing.T) {
	rdb := requireRedis(t)
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{Redis: redisBlock(false)})
	// The key's name, read before the limit exists: a report on the limit
	// would be its counter's first use and seed it.
	name := identityName(t, gatewayKey)
	u := createLimit(t, rdb, tinyBudget)
	per := u.PeriodAt(time.Now())
	group := u.Policy().GroupKey(&policies.Attributes{WorkspaceID: u.WorkspaceID, OrganisationID: u.OrganisationID, APIKey: name})
	const oldMicro = 15
	old := policies.NewRedisLimiter(rdb, policies.WithKeyPrefix(counterPrefix))
	if err := old.Adjust(context.Background(), "budget|"+group+"|"+per.Label, 20, 2*per.End.Sub(per.Start), oldMicro); err != nil {
		t.Fatal(err)
	}

	ok, last, raw := spendUntilRefused(t, tinyBudgetNano-oldMicro*1_000, func() (*http.Response, []byte) {
		return rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
	})
	if want := passesOn(tinyBudgetNano-oldMicro*1_000, rlChatNano); ok != want || last.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("%d requests passed on a budget the old version had counted %d µ$ of, then %d %s; want %d then 412",
			ok, oldMicro, last.StatusCode, raw, want)
	}
	want := oldMicro*1_000 + int64(ok)*rlChatNano
	if used := waitUsed(t, gatewayURL(), gatewayKey, want); used != want {
		t.Errorf("used %d n$, want the old %d µ$ and %d requests of %d n$", used, oldMicro, ok, rlChatNano)
	}
}

// identityName is the key name key authenticates as (its ledger and
// counter name), from GET /v1/usage/me.
func identityName(t *testing.T, key string) string {
	t.Helper()
	resp, raw := rawDo(t, gatewayURL(), http.MethodGet, "/usage/me", nil, "x-gateway-api-key", key)
	var me struct {
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(raw, &me); err != nil || resp.StatusCode != 200 || me.APIKey == "" {
		t.Fatalf("usage/me: %d %s", resp.StatusCode, raw)
	}
	return me.APIKey
}
