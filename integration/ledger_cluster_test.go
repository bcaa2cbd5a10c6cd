package integration

import (
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// budgetModelHook streams answers that report 1000 completion tokens, which
// the test's price catalog prices at exactly $0.01.
func budgetModelHook(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.URL.Path != "/v1/chat/completions" {
		return false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"budget-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":null}]}\n\n")
	fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"budget-model\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"budget-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1000,\"total_tokens\":1010}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	return true
}

// TestBudgetClusterConcurrentStreams is the target through real
// gateways: three instances (this process's Caddy and two gateway
// processes) share one Redis and one PostgreSQL ledger; a $1.00 monthly
// budget takes 200 concurrent streamed requests of $0.01 each (each
// reserving $0.02) spread over the three. Settled spend ends at most one
// request past the budget, at least 95 requests succeed, every refusal is
// a 412 budget_exceeded, and the ledger's records of all three instances
// sum to the budget's settled spend.
func TestBudgetClusterConcurrentStreams(t *testing.T) {
	requireRedis(t)
	dsn := ledgerPostgres(t)
	bin := buildGateway(t)
	up := newFakeOpenAI(t)
	up.Hook = budgetModelHook
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"budget-model":{"litellm_provider":"openai","mode":"chat","input_cost_per_token":0,"output_cost_per_token":1e-05}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	llm := redisBlock(false) + fmt.Sprintf("\n\t\tprice_catalog %s\n\t\tledger %q", prices, dsn)

	bases := []string{}
	for i := 0; i < 2; i++ {
		port := freePort()
		dir := t.TempDir()
		s := rlSite{Redis: llm, Storage: filepath.Join(dir, "storage"), HTTPPort: port, AdminPort: freePort(), Log: filepath.Join(dir, "gw.log")}
		startGateway(t, bin, dir, s.caddyfile(), port)
		bases = append(bases, fmt.Sprintf("http://127.0.0.1:%d/v1", port))
	}
	loadRL(t, rlSite{Redis: llm})
	bases = append(bases, gatewayURL())

	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{"name":"cluster budget","type":"cost",
		"credit_limit":1,"periodic_reset":"monthly","conditions":[{"key":"metadata.run","value":"*"}],"group_by":[{"key":"metadata.run"}]}`)
	if status != 200 {
		t.Fatalf("create: %d %v", status, m)
	}
	id := m["id"].(string)
	t.Cleanup(func() { api(t, gatewayKey, http.MethodDelete, "/policies/usage-limits/"+id, "") })

	run := fmt.Sprintf(`{"run":"budget-%d"}`, time.Now().UnixNano())
	const n = 200
	body := `{"model":"budget-model","stream":true,"stream_options":{"include_usage":true},"max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`
	codes, bodies := make([]int, n), make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			resp, raw := rlChat(t, bases[i%len(bases)], gatewayKey, up.URL, body, "x-gateway-metadata", run)
			codes[i], bodies[i] = resp.StatusCode, string(raw)
		}(i)
	}
	close(start)
	wg.Wait()
	got := countStatuses(codes)
	for i, c := range codes {
		if c == 412 && !strings.Contains(bodies[i], "budget_exceeded") || c != 200 && c != 412 {
			t.Fatalf("instance %d answered %d: %s", i%len(bases), c, bodies[i])
		}
	}

	t.Logf("%d concurrent streams of $0.01 over 3 instances on a $1.00 budget: %d succeeded, %d refused (412)", n, got[200], got[412])
	if got[200] < 95 {
		t.Errorf("only %d requests succeeded, want at least 95", got[200])
	}
	// Every instance records into the shared ledger; the two processes
	// write within their flush interval, so wait (bounded) for all of
	// the successes to be there, then compare the costs.
	syncLedger(t)
	var logs struct {
		Total int64
		Data  []struct {
			CostNano int64 `json:"cost_nano_usd"`
		}
	}
	q := "/logs?page_size=100&metadata=" + url.QueryEscape(run)
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs.Total = 0
		getJSON(t, q, gatewayKey, &logs)
		if logs.Total >= int64(got[200]) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var cost struct {
		Summary struct {
			TotalUSD string `json:"total_usd"`
		}
	}
	getJSON(t, "/analytics/graphs/cost?metadata="+url.QueryEscape(run), gatewayKey, &cost)
	spent, _ := new(big.Rat).SetString(cost.Summary.TotalUSD)
	t.Logf("ledger: %d records, settled spend $%s", logs.Total, cost.Summary.TotalUSD)
	if logs.Total != int64(got[200]) {
		t.Errorf("the ledger holds %d records of the run, want the %d successes", logs.Total, got[200])
	}
	if spent == nil || spent.Cmp(big.NewRat(101, 100)) > 0 {
		t.Errorf("settled spend $%s exceeds $1.00 plus one request", cost.Summary.TotalUSD)
	}
	if want := big.NewRat(int64(got[200]), 100); spent == nil || spent.Cmp(want) != 0 {
		t.Errorf("ledger spend $%s, want %d × $0.01", cost.Summary.TotalUSD, got[200])
	}
}
