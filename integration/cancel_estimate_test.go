package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestCancelledStreamSettlesEstimate: a key under a cost usage limit and
// a tokens rate limit streams from a provider that sends a chunk of six
// characters every 100 ms and never reports usage. While the stream runs
// both hold its reservation (the prompt and 1,024 output tokens); the
// client reads three chunks and cancels. Within a second both hold the
// gateway's estimate instead: ceil(body bytes / 4) input tokens and
// ceil(characters delivered / 4) output tokens, priced by the catalog,
// which the ledger records marked estimated.
func TestCancelledStreamSettlesEstimate(t *testing.T) {
	rdb := requireRedis(t)
	run := uuid.NewString()
	model := "cancel-model-" + run
	const chunk = "hello " // six characters a chunk
	up := newFakeOpenAI(t)
	up.Hook = func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != "/v1/chat/completions" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i := 0; i < 100; i++ {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", model, chunk)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return true
			case <-time.After(100 * time.Millisecond):
			}
		}
		return true
	}
	price := `{"litellm_provider":"openai","mode":"chat","input_cost_per_token":1e-06,"output_cost_per_token":1e-05}`
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"`+model+`":`+price+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	loadRL(t, rlSite{Redis: redisBlock(false) + fmt.Sprintf("\n\t\tprice_catalog %s\n\t\tledger %q", prices, filepath.Join(t.TempDir(), "ledger.db"))})
	cond := `"conditions":[{"key":"model","value":"` + model + `"}],"group_by":[{"key":"model"}]`
	rl := createPolicy(t, gatewayKey, `{"type":"tokens","unit":"rph","value":1000000,`+cond+`}`)
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{"name":"cancel","type":"cost","credit_limit":10,"periodic_reset":"monthly",`+cond+`}`)
	if status != 200 {
		t.Fatalf("usage limit: %d %v", status, m)
	}
	limit := m["id"].(string)
	t.Cleanup(func() { api(t, gatewayKey, http.MethodDelete, "/policies/usage-limits/"+limit, "") })
	tokens := func() int64 { return counterSum(t, rdb, "llmgw:rl:"+rl+"|*") }
	// Cost usage limits count nano-dollars, under keys of their own.
	spent := func() int64 { return counterSum(t, rdb, "llmgw:rl:budget|nano|"+limit+"|*") }

	body := `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"tell me a long story"}]}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "x-gateway-api-key": gatewayKey, "x-gateway-provider": "openai",
		"x-gateway-custom-host": up.URL, "Authorization": "Bearer sk-test-provider", "x-gateway-metadata": `{"run":"` + run + `"}`} {
		req.Header.Set(k, v)
	}
	resp, err := rlClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	read := 0
	for read < 3 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: {") {
			read++
		}
	}
	reservedTokens, reservedSpend := tokens(), spent()
	cancel()
	cancelled := time.Now()

	// The estimate the gateway settles: the chunks it delivered are the
	// three read and at most two more on their way.
	input := int64(len(body)+3) / 4
	cat, err := cost.Parse([]byte(`{"` + model + `":` + price + `}`))
	if err != nil {
		t.Fatal(err)
	}
	estimates := map[int64]int64{} // output tokens -> nano-dollars
	for k := int64(read); k <= int64(read)+2; k++ {
		out := (k*int64(len(chunk)) + 3) / 4
		usd, _ := cat.Cost("openai", model, providers.Usage{PromptTokens: input, CompletionTokens: out, TotalTokens: input + out})
		estimates[out] = budgets.NanoUSD(usd)
	}
	var settledTokens, settledSpend int64
	for {
		settledTokens, settledSpend = tokens(), spent()
		if out := settledTokens - input; estimates[out] != 0 && settledSpend == estimates[out] {
			break
		}
		if time.Since(cancelled) > time.Second {
			t.Fatalf("a second after the cancel: %d tokens and %d n$ counted (reserved %d, %d), want %d input tokens and one of %v output tokens (n$)",
				settledTokens, settledSpend, reservedTokens, reservedSpend, input, estimates)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(cancelled)
	t.Logf("cancelled after %d chunks: settled %v later at %d tokens, %d n$ (reserved %d tokens, %d n$)",
		read, took.Round(time.Millisecond), settledTokens, settledSpend, reservedTokens, reservedSpend)
	if reservedTokens <= settledTokens || reservedSpend <= settledSpend {
		t.Errorf("the reservation (%d tokens, %d n$) was not above the estimate", reservedTokens, reservedSpend)
	}

	syncLedger(t)
	var logs struct {
		Data []struct {
			Input     int64 `json:"input_tokens"`
			Output    int64 `json:"output_tokens"`
			Cost      int64 `json:"cost_nano_usd"`
			Known     bool  `json:"cost_known"`
			Estimated bool  `json:"estimated"`
		}
	}
	getJSON(t, "/logs?metadata="+url.QueryEscape(`{"run":"`+run+`"}`), gatewayKey, &logs)
	if len(logs.Data) != 1 {
		t.Fatalf("%d ledger records of the stream", len(logs.Data))
	}
	r := logs.Data[0]
	if !r.Estimated || !r.Known || r.Input != input || r.Input+r.Output != settledTokens || r.Cost == 0 || r.Cost != settledSpend {
		t.Errorf("ledger record %+v, want %d input and %d output tokens, estimated, costing the %d n$ the budget was charged",
			r, input, settledTokens-input, settledSpend)
	}
}
