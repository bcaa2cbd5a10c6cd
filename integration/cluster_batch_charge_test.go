package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// chargeLineAnswer is every batch line's answer: 3 prompt and 1
// completion tokens of charge-model, which the test's price catalog
// prices at 3 × 1 µ$ + 1 × 10 µ$ = 13 µ$.
const chargeLineAnswer = `{"id":"c","object":"chat.completion","created":1,"model":"charge-model","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

const (
	chargeLineTokens = 4
	chargeLineNano   = 13_000
)

// TestClusterBatchChargedOnce: each line of a managed batch is charged
// exactly once across a takeover in which lines really run twice. The
// owner (A, a gateway binary) is frozen (SIGSTOP: a long pause, a
// partition) while 8 lines are in flight at the provider; once its lease
// (batches { lease 2s }) lapses this process's Caddy (B) takes the batch
// over, runs those 8 lines again and finishes the batch. Then A wakes up
// (SIGCONT) and its 8 runs finish too, after B's: each of them finds the
// line already charged, gives its reservations back and writes no ledger
// record. Both instances share Redis (rate limits, budgets, claims) and a
// PostgreSQL ledger. At the end: every custom_id once in the output, 200
// ledger records (one per custom_id), and the rate-limit token counter
// and both usage limits (tokens, cost) hold exactly 200 lines' usage.
func TestClusterBatchChargedOnce(t *testing.T) {
	rdb := requireRedis(t)
	dsn := ledgerPostgres(t)
	bin := buildGateway(t)
	const lines = 200

	var (
		mu      sync.Mutex
		calls   = map[int]int{}
		held    = make(chan struct{})
		release = make(chan struct{})
		holding = true
		started int
	)
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(gjson.GetBytes(body, "messages.0.content").Str, "line "))
		mu.Lock()
		calls[n]++
		started++
		hold := holding && started > 60
		if hold && started == 68 {
			close(held)
		}
		mu.Unlock()
		if hold { // A's runs wait until B has finished the batch
			select {
			case <-release:
			case <-r.Context().Done():
				return true
			}
		}
		writeJSON(w, 200, []byte(chargeLineAnswer))
		return true
	}
	// The policies apply to the lines' model, a new one, so the batch's
	// creation (no model, and a batch's creation is never reserved) is not
	// counted with them.
	run := uuid.NewString()
	model := "charge-model-" + run
	prices := filepath.Join(t.TempDir(), "prices.json")
	price := `{"litellm_provider":"openai","mode":"chat","input_cost_per_token":1e-06,"output_cost_per_token":1e-05}`
	if err := os.WriteFile(prices, []byte(`{"charge-model":`+price+`,"`+model+`":`+price+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	llm := redisBlock(false) + fmt.Sprintf("\n\t\tvirtual_key vk-charge {\n\t\t\tprovider openai\n\t\t\tapi_key sk-test-provider\n\t\t\tcustom_host %s\n\t\t}", up.URL) +
		fmt.Sprintf("\n\t\tprice_catalog %s\n\t\tledger %q\n\t\tbatches {\n\t\t\tlease 2s\n\t\t}", prices, dsn)

	// B first: the policies are created through it, before A loads any.
	loadRL(t, rlSite{Redis: llm})
	cond := `"conditions":[{"key":"model","value":"` + model + `"}],"group_by":[{"key":"model"}]`
	rl := createPolicy(t, gatewayKey, `{"type":"tokens","unit":"rph","value":1000000,`+cond+`}`)
	var limits []string
	for _, body := range []string{
		`{"name":"charge tokens","type":"tokens","credit_limit":1000000,"periodic_reset":"monthly",` + cond + `}`,
		`{"name":"charge cost","type":"cost","credit_limit":10,"periodic_reset":"monthly",` + cond + `}`,
	} {
		status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", body)
		if status != 200 {
			t.Fatalf("usage limit: %d %v", status, m)
		}
		id := m["id"].(string)
		limits = append(limits, id)
		t.Cleanup(func() { api(t, gatewayKey, http.MethodDelete, "/policies/usage-limits/"+id, "") })
	}

	portA := freePort()
	dir := t.TempDir()
	logA := filepath.Join(dir, "a.log")
	a := startGateway(t, bin, dir, rlSite{Redis: llm, Storage: filepath.Join(dir, "storage"), HTTPPort: portA,
		AdminPort: freePort(), Log: logA}.caddyfile(), portA)
	client := func(base string) openai.Client {
		return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
			option.WithHeader("x-gateway-api-key", gatewayKey))
	}
	clientA := client(fmt.Sprintf("http://127.0.0.1:%d/v1", portA))
	var in bytes.Buffer
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&in, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"%s","messages":[{"role":"user","content":"line %d"}]}}`+"\n", i, model, i)
	}
	ctx := context.Background()
	f, err := clientA.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(in.Bytes()), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := clientA.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"},
		option.WithHeader("x-gateway-virtual-key", "vk-charge"), option.WithHeader("x-gateway-metadata", `{"run":"`+run+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	select { // 60 lines answered, 8 in flight on A
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the batch on A did not reach 68 lines")
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	mu.Lock()
	holding = false // B's runs are answered at once
	mu.Unlock()

	clientB := client(gatewayURL())
	var got *openai.Batch
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got, err = clientB.Batches.Get(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		if got.Status == openai.BatchStatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s after A was frozen: %+v", got.Status, got.RequestCounts)
		}
	}
	took := time.Since(stopped)
	// A wakes up: its 8 runs get their answers and finish after B's.
	close(release)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Every run of a line after the first is one A made and finished
	// after B's; each logs that it found its line charged.
	twice, dups, distinct := 0, 0, 0
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		twice, distinct = 0, len(calls)
		for _, c := range calls {
			twice += c - 1
		}
		mu.Unlock()
		raw, _ := os.ReadFile(logA)
		dups = bytes.Count(raw, []byte(`"charge_duplicate":true`))
		if twice > 0 && dups == twice || time.Now().After(deadline) {
			break
		}
	}

	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(fileText(t, clientB, got.OutputFileID)), "\n") {
		seen[gjson.Get(l, "custom_id").Str]++
	}
	t.Logf("A frozen mid-batch; B finished it %v later (lease 2 s); %d lines ran twice, %d of those runs found their line charged",
		took.Round(100*time.Millisecond), twice, dups)
	if len(seen) != lines || got.RequestCounts.Completed != lines || distinct != lines {
		t.Fatalf("output has %d custom_ids, counts %+v, provider saw %d lines", len(seen), got.RequestCounts, distinct)
	}
	if twice == 0 || twice > 8 || dups != twice {
		t.Fatalf("%d lines ran twice (want 1 to 8), %d duplicate runs were recognised", twice, dups)
	}

	// The ledger: one record per custom_id, all of this batch. Both
	// instances write within their flush interval.
	syncLedger(t)
	var (
		records map[string]int
		total   int64
	)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		records, total = map[string]int{}, 0
		for page := 0; page < 3; page++ {
			var logs struct {
				Data []struct {
					BatchID  string `json:"batch_id"`
					CustomID string `json:"custom_id"`
					Cost     int64  `json:"cost_nano_usd"`
				}
			}
			getJSON(t, fmt.Sprintf("/logs?page_size=100&current_page=%d&metadata=%s", page, url.QueryEscape(`{"run":"`+run+`"}`)), gatewayKey, &logs)
			total = 0
			for _, d := range logs.Data {
				if d.BatchID == "" && d.Cost == 0 {
					continue // the batch's creation
				}
				if d.BatchID != b.ID || d.Cost != chargeLineNano {
					t.Fatalf("ledger record %+v, want batch %s costing %d nano-dollars", d, b.ID, chargeLineNano)
				}
				records[d.CustomID]++
			}
		}
		for _, n := range records {
			total += int64(n)
		}
		if total >= lines || time.Now().After(deadline) {
			break
		}
	}
	if total != lines || len(records) != lines {
		t.Fatalf("the ledger holds %d records of the batch's lines, of %d custom_ids, want %d", total, len(records), lines)
	}

	// The rate limit's token counter and both usage limits hold 200
	// lines' usage: A's reservations came back.
	if got := counterSum(t, rdb, "llmgw:rl:"+rl+"|*"); got != lines*chargeLineTokens {
		t.Errorf("rate-limit tokens counted %d, want %d × %d", got, lines, chargeLineTokens)
	}
	// Usage limits count what the ledger counts: each request's cost to
	// the nano-dollar (budgets.NanoUSD), as the catalog prices it; a cost
	// limit's counters have keys of their own (budget|nano|).
	cat, err := cost.Parse([]byte(`{"charge-model":` + price + `}`))
	if err != nil {
		t.Fatal(err)
	}
	lineUSD, _ := cat.Cost("openai", "charge-model", providers.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4})
	for i, c := range []struct {
		keys string
		want int64
	}{
		{"llmgw:rl:budget|" + limits[0] + "|*", lines * chargeLineTokens},
		{"llmgw:rl:budget|nano|" + limits[1] + "|*", lines * budgets.NanoUSD(lineUSD)},
	} {
		if got := counterSum(t, rdb, c.keys); got != c.want {
			t.Errorf("usage limit %d counted %d, want %d", i, got, c.want)
		}
	}
}

// counterSum adds up the units of the limiter counters matching pattern
// (each a hash of buckets beside its width "w"), leaving out the
// in-flight reservation counters.
func counterSum(t *testing.T, rdb *redis.Client, pattern string) int64 {
	t.Helper()
	ctx := context.Background()
	var sum int64
	for it := rdb.Scan(ctx, 0, pattern, 1000).Iterator(); it.Next(ctx); {
		h, err := rdb.HGetAll(ctx, it.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(it.Val(), "|pending") {
			continue
		}
		for k, v := range h {
			if k != "w" {
				n, _ := strconv.ParseInt(v, 10, 64)
				sum += n
			}
		}
	}
	return sum
}
