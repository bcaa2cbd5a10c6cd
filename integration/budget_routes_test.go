package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
)

// Budgets hold on every route llm_gateway serves, with or without
// llm_ratelimit in front of it, and a request is reserved and charged
// on them exactly once.

// tinyBudget is a usage limit of 20 micro-dollars (20,000 nano-dollars,
// tinyBudgetNano) per gateway key: seven of rlChat's requests of 3.15
// micro-dollars each, the seventh on the 1.1 left (budgets count what
// the ledger counts, to the nano-dollar; they counted five of 4
// micro-dollars, rounded up, before).
const tinyBudget = `{"name": "tiny", "type": "cost", "credit_limit": 0.00002, "periodic_reset": "monthly",
	"conditions": [{"key": "api_key", "value": "*"}], "group_by": [{"key": "api_key"}]}`

// tinyBudgetNano is tinyBudget's credit_limit in nano-dollars.
const tinyBudgetNano = 20_000

// spendUntilRefused sends up to 20 requests and returns how many passed
// before the first that did not, and that one's answer. The requests
// that passed are checked against a budget of budgetNano: each was
// admitted while some of it was left (what the earlier ones cost, their
// x-gateway-cost headers to the nano-dollar, was below it), and the
// refusal came once nothing was.
func spendUntilRefused(t *testing.T, budgetNano int64, send func() (*http.Response, []byte)) (int, *http.Response, []byte) {
	t.Helper()
	var spent int64
	for i := 0; i < 20; i++ {
		resp, raw := send()
		if resp.StatusCode != 200 {
			if spent < budgetNano {
				t.Errorf("refused after %d requests spent %d n$ of a %d n$ budget, with budget left", i, spent, budgetNano)
			}
			return i, resp, raw
		}
		if spent >= budgetNano {
			t.Errorf("request %d passed when %d n$ of a %d n$ budget were spent", i, spent, budgetNano)
		}
		spent += costNano(t, resp.Header.Get("X-Gateway-Cost"))
	}
	t.Fatal("20 requests passed a 20 micro-dollar budget")
	return 0, nil, nil
}

// passesOn is how many requests of costNano each a budget of budgetNano
// admits one after another: until it is spent, the last on what was
// left.
func passesOn(budgetNano, costNano int64) int {
	return int((budgetNano + costNano - 1) / costNano)
}

// rlChatNano is what one rlChat request costs: 9 prompt and 3 completion
// tokens of gpt-4o-mini, 3.15 micro-dollars.
const rlChatNano = 3_150

// TestBudgetHoldsWithoutRatelimit: on a route without llm_ratelimit, a
// usage limit created through the API and a key's own usage_limits are
// enforced all the same: seven requests pass (the seventh on what was
// left), the eighth is a 412 budget_exceeded; then every kind of request the gateway sends to a
// provider (Messages, Responses, embeddings, a pass-through path) is
// refused before any provider call, while another key is not limited.
func TestBudgetHoldsWithoutRatelimit(t *testing.T) {
	t.Run("API usage limit", func(t *testing.T) {
		up := newFakeOpenAI(t)
		loadRL(t, rlSite{NoLimiter: true})
		if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", tinyBudget); status != 200 {
			t.Fatalf("create: %d %v", status, m)
		}
		ok, last, raw := spendUntilRefused(t, tinyBudgetNano, func() (*http.Response, []byte) {
			return rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
		})
		if want := passesOn(tinyBudgetNano, rlChatNano); ok != want || last.StatusCode != http.StatusPreconditionFailed || errCode(t, raw) != budgets.CodeExceeded {
			t.Fatalf("%d requests passed, then %d %s; want %d then 412 %s", ok, last.StatusCode, raw, want, budgets.CodeExceeded)
		}
		calls := up.count()
		route := []string{"x-gateway-api-key", gatewayKey, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL,
			"Authorization", "Bearer sk-test-provider"}
		for _, tc := range []struct{ name, path, body string }{
			{"messages", "/messages", `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`},
			{"responses", "/responses", `{"model":"gpt-4o-mini","input":"hi"}`},
			{"embeddings", "/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`},
			{"pass-through", "/moderations", `{"model":"omni-moderation-latest","input":"hi"}`},
			{"streamed chat", "/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		} {
			resp, raw := rawDo(t, gatewayURL(), http.MethodPost, tc.path, []byte(tc.body), route...)
			// Messages answers in Anthropic's error shape, which has no
			// code; every shape says the limit is exhausted.
			if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(string(raw), "is exhausted") {
				t.Errorf("%s after the budget was spent: %d %s, want the 412 of the spent budget", tc.name, resp.StatusCode, raw)
			}
		}
		if up.count() != calls {
			t.Errorf("the provider was called %d times after the budget was spent", up.count()-calls)
		}
		if resp, raw := rlChat(t, gatewayURL(), rlOtherKey, up.URL, ""); resp.StatusCode != 200 {
			t.Errorf("another workspace's key: %d %s", resp.StatusCode, raw)
		}
	})
	t.Run("key usage_limits", func(t *testing.T) {
		up := newFakeOpenAI(t)
		s := newKeysSite(t, vkOpenAI("openai", up.URL))
		s.load(t) // llm_gateway alone, no llm_ratelimit
		var created createdKey
		as(t, keysAdminKey, "POST", "/api-keys/workspace/service",
			`{"name":"budgeted","workspace_id":"`+keysWorkspace+`","scopes":["completions.write"],"usage_limits":{"credit_limit":0.00002,"periodic_reset":"monthly"},"defaults":{"virtual_key":"openai"}}`,
			200, &created)
		body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
		ok, last, raw := spendUntilRefused(t, tinyBudgetNano, func() (*http.Response, []byte) {
			return do(t, "POST", "/chat/completions", body, "x-gateway-api-key", created.Key)
		})
		if want := passesOn(tinyBudgetNano, rlChatNano); ok != want || last.StatusCode != http.StatusPreconditionFailed || errCode(t, raw) != budgets.CodeExceeded {
			t.Fatalf("%d requests passed, then %d %s; want %d then 412 %s", ok, last.StatusCode, raw, want, budgets.CodeExceeded)
		}
		if resp, raw := do(t, "POST", "/chat/completions", body, "x-gateway-virtual-key", "openai"); resp.StatusCode != 200 {
			t.Errorf("another key: %d %s", resp.StatusCode, raw)
		}
	})
}

// usedNano returns what /v1/usage/me says key has used of its one usage
// limit, in nano-dollars.
func usedNano(t *testing.T, base, key string) int64 {
	t.Helper()
	resp, raw := rawDo(t, base, http.MethodGet, "/usage/me", nil, "x-gateway-api-key", key)
	var me struct {
		UsageLimits []struct {
			Used float64 `json:"used"`
		} `json:"usage_limits"`
	}
	if err := json.Unmarshal(raw, &me); err != nil || resp.StatusCode != 200 || len(me.UsageLimits) != 1 {
		t.Fatalf("usage/me: %d %s", resp.StatusCode, raw)
	}
	return int64(math.Round(me.UsageLimits[0].Used * budgets.NanoPerUSD))
}

// waitUsed waits until key's budget shows at least want nano-dollars
// used (settlement runs as the answer ends), then a little longer, so a
// second charge of the same request would show too, and returns it.
func waitUsed(t *testing.T, base, key string, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for usedNano(t, base, key) < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	return usedNano(t, base, key)
}

// costNano is a cost header in nano-dollars as a budget charges it and
// the ledger records it (ledger.NanoFromUSD).
func costNano(t testing.TB, h string) int64 {
	t.Helper()
	var usd float64
	if _, err := fmt.Sscan(h, &usd); err != nil || h == "" {
		t.Fatalf("x-gateway-cost %q", h)
	}
	return ledger.NanoFromUSD(usd)
}

// TestBudgetChargedOnce: on a route with llm_ratelimit (which reserves
// the request on its budgets before the gateway) and on one without
// (where the gateway does), a request is charged exactly its cost: the
// spend after three requests is the sum of their x-gateway-cost headers,
// not twice that.
func TestBudgetChargedOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ratelimit bool
	}{
		{"with llm_ratelimit", true},
		{"without llm_ratelimit", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newFakeOpenAI(t)
			loadRL(t, rlSite{NoLimiter: !tc.ratelimit})
			big := strings.Replace(tinyBudget, "0.00002", "1", 1)
			if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", big); status != 200 {
				t.Fatalf("create: %d %v", status, m)
			}
			var want int64
			for i := 0; i < 3; i++ {
				resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
				if resp.StatusCode != 200 || resp.Header.Get("X-Gateway-Budget-Policy") == "" {
					t.Fatalf("request %d: %d %v %s", i, resp.StatusCode, resp.Header, raw)
				}
				want += costNano(t, resp.Header.Get("X-Gateway-Cost"))
			}
			if got := waitUsed(t, gatewayURL(), gatewayKey, want); got != want || want == 0 {
				t.Errorf("spent %d nano-dollars after three requests costing %d in all", got, want)
			}
		})
	}
}

// TestBudgetChargesBatchLines: a managed batch created on a route without
// llm_ratelimit runs its lines clientless; each line is charged to the
// creator's budget once: the spend equals the lines' ledger costs.
func TestBudgetChargesBatchLines(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	// A storage of its own, so the limit never outlives the test.
	newKeysSite(t, fmt.Sprintf("ledger %q", filepath.Join(t.TempDir(), "ledger.db"))).load(t)
	reloadSafeTransport.CloseIdleConnections()
	big := strings.Replace(tinyBudget, "0.00002", "1", 1)
	if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", big); status != 200 {
		t.Fatalf("create: %d %v", status, m)
	}
	client := anthropicClient(up)
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(3, 2)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	syncLedger(t)
	var logs struct {
		Data []struct {
			Cost int64 `json:"cost_nano_usd"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100&ai_org_model=claude-sonnet-4-5,claude-unknown", gatewayKey, &logs); code != 200 || len(logs.Data) != 3 {
		t.Fatalf("GET /v1/logs: %d, %d records", code, len(logs.Data))
	}
	var want int64
	for _, l := range logs.Data {
		want += l.Cost
	}
	if got := waitUsed(t, gatewayURL(), gatewayKey, want); got != want || want == 0 {
		t.Errorf("spent %d nano-dollars on batch lines whose records cost %d", got, want)
	}
}

// TestBudgetChargesSemanticCacheEmbeddings: the semantic cache's
// embedding calls are the caller's: each is a ledger record of the
// caller's key (operation embeddings, the request's trace id) and is
// charged to the caller's budget, so a semantic hit, which costs no
// provider call, still costs its embedding; and the budget's spend equals
// the ledger's records.
func TestBudgetChargesSemanticCacheEmbeddings(t *testing.T) {
	emb := newFakeEmbeddings(t, semanticTable())
	up := newEchoChat(t)
	newKeysSite(t, semanticLLM(emb, "max_entries 100")+fmt.Sprintf("\n\t\tledger %q", filepath.Join(t.TempDir(), "ledger.db"))).load(t)
	big := strings.Replace(tinyBudget, "0.00002", "1", 1)
	if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", big); status != 200 {
		t.Fatalf("create: %d %v", status, m)
	}
	cfg := compactJSON(t, target(up.fakeOpenAI, `"cache":{"mode":"semantic","max_age":60}`))
	var chat int64
	traces := map[string]bool{}
	for _, st := range []struct{ question, status string }{
		{qFrance, "SEMANTIC MISS"},
		{qPara, "SEMANTIC HIT"},
	} {
		resp, raw := do(t, "POST", "/chat/completions", askBody("gpt-4o-mini", st.question), "x-gateway-config", cfg)
		if resp.StatusCode != 200 || resp.Header.Get("x-gateway-cache-status") != st.status {
			t.Fatalf("%s: %d %s %s", st.question, resp.StatusCode, resp.Header.Get("x-gateway-cache-status"), raw)
		}
		if h := resp.Header.Get("X-Gateway-Cost"); h != "" {
			chat += costNano(t, h)
		}
		traces[resp.Header.Get("x-gateway-trace-id")] = true
	}
	if emb.calls() != 2 || up.count() != 1 {
		t.Fatalf("%d embedding calls and %d chat calls, want 2 and 1", emb.calls(), up.count())
	}
	syncLedger(t)
	var logs struct {
		Data []struct {
			APIKey    string `json:"api_key"`
			TraceID   string `json:"trace_id"`
			Operation string `json:"operation"`
			Model     string `json:"model"`
			Cost      int64  `json:"cost_nano_usd"`
			Known     bool   `json:"cost_known"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100", gatewayKey, &logs); code != 200 {
		t.Fatalf("GET /v1/logs: %d", code)
	}
	var ledgerNano, embedNano int64
	embeds := 0
	for _, l := range logs.Data {
		ledgerNano += l.Cost
		if l.Operation != "embeddings" {
			continue
		}
		embeds++
		embedNano += l.Cost
		// 5 tokens of text-embedding-3-small at $0.02 per million.
		if l.APIKey != "test" || !traces[l.TraceID] || l.Model != "text-embedding-3-small" || !l.Known || l.Cost != 100 {
			t.Errorf("embedding record %+v: want the caller's key and trace id, priced 100 nano-dollars", l)
		}
	}
	if embeds != 2 || len(logs.Data) != 4 {
		t.Fatalf("%d records, %d of embeddings; want 2 requests and their 2 embeddings: %+v", len(logs.Data), embeds, logs.Data)
	}
	want := chat + embedNano
	if got := waitUsed(t, gatewayURL(), gatewayKey, want); got != want || got != ledgerNano || embedNano == 0 {
		t.Errorf("spent %d nano-dollars; want the chat's %d plus the embeddings' %d, as the ledger's %d", got, chat, embedNano, ledgerNano)
	}
}

// TestBudgetConcurrentWithoutRatelimit: the gateway's own admission is as
// exact under concurrency as llm_ratelimit's: 40 concurrent requests of
// 3.15 micro-dollars against a 20 micro-dollar budget on a route without
// llm_ratelimit: exactly seven pass (none refused while budget was left,
// the last on what was left), the rest get the 412, and the spend is what
// the seven cost, less than one request past the budget.
func TestBudgetConcurrentWithoutRatelimit(t *testing.T) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{NoLimiter: true})
	if status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", tinyBudget); status != 200 {
		t.Fatalf("create: %d %v", status, m)
	}
	const n = 40
	codes := make([]int, n)
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			resp, _ := rlChat(t, gatewayURL(), gatewayKey, up.URL, "")
			codes[i] = resp.StatusCode
		}()
	}
	for range n {
		<-done
	}
	got := countStatuses(codes)
	pass := passesOn(tinyBudgetNano, rlChatNano)
	if got[200] != pass || got[http.StatusPreconditionFailed] != n-pass {
		t.Errorf("statuses %v, want %d × 200 and %d × 412", got, pass, n-pass)
	}
	want := int64(got[200]) * rlChatNano
	if spent := waitUsed(t, gatewayURL(), gatewayKey, want); spent != want || spent < tinyBudgetNano || spent >= tinyBudgetNano+rlChatNano {
		t.Errorf("spent %d nano-dollars of a %d nano-dollar budget, want the %d the passed requests cost", spent, tinyBudgetNano, want)
	}
}
