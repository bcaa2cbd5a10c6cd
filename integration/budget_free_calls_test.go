package integration

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
)

// TestSpentBudgetLeavesFreeCallsAlone: once a usage limit is spent, the
// calls that cost nothing stay open to the requests it applies to, so a
// team out of money can still read its batches' results, list and fetch
// its files, cancel a batch and list the models; only calls that can
// spend (a chat) get the 412, and a batch made then fails line by line.
// Both with llm_ratelimit on the route and with llm_gateway alone, which
// reserves on usage limits itself.
func TestSpentBudgetLeavesFreeCallsAlone(t *testing.T) {
	requireRedis(t)
	for _, tc := range []struct {
		name      string
		noLimiter bool
	}{{"llm_ratelimit on the route", false}, {"llm_gateway alone", true}} {
		t.Run(tc.name, func(t *testing.T) { spentBudgetFreeCalls(t, tc.noLimiter) })
	}
}

func spentBudgetFreeCalls(t *testing.T, noLimiter bool) {
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{Redis: redisBlock(false) + "\n\t\t" + vkOpenAI("vk-free", up.URL), NoLimiter: noLimiter})
	run := uuid.NewString()
	meta := `{"run":"` + run + `"}`
	// The gateway keeps the files and batches: no provider is named but
	// the batch's (its lines run on vk-free).
	hdr := []string{"x-gateway-api-key", gatewayKey, "x-gateway-metadata", meta}
	spend := append([]string{"x-gateway-virtual-key", "vk-free"}, hdr...)

	// A file made while money is left.
	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
		option.WithHeader("x-gateway-api-key", gatewayKey), option.WithHeader("x-gateway-metadata", meta))
	ctx := context.Background()
	line := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader([]byte(line)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil || f.ID == "" {
		t.Fatalf("upload: %v %+v", err, f)
	}
	cond := `"conditions":[{"key":"metadata.run","value":"` + run + `"}],"group_by":[{"key":"metadata.run"}]`
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits", `{"name":"spent","type":"tokens","credit_limit":1,"periodic_reset":"monthly",`+cond+`}`)
	if status != 200 {
		t.Fatalf("usage limit: %d %v", status, m)
	}
	id := m["id"].(string)
	t.Cleanup(func() { api(t, gatewayKey, http.MethodDelete, "/policies/usage-limits/"+id, "") })
	chat := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	if resp, raw := rawDo(t, gatewayURL(), http.MethodPost, "/chat/completions", chat, spend...); resp.StatusCode != 200 {
		t.Fatalf("the request that spends the budget: %d %s", resp.StatusCode, raw)
	}

	// A batch made on the spent budget costs nothing itself; its line is
	// refused as it runs, and the batch ends with it failed.
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "24h"},
		option.WithHeader("x-gateway-virtual-key", "vk-free"))
	if err != nil {
		t.Fatalf("a batch on the spent budget: %v", err)
	}
	before := up.count()
	for deadline := time.Now().Add(30 * time.Second); b.Status != openai.BatchStatusCompleted; time.Sleep(50 * time.Millisecond) {
		if b, err = client.Batches.Get(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch still %s", b.Status)
		}
	}
	if b.RequestCounts.Failed != 1 || up.count() != before || !strings.Contains(fileText(t, client, b.ErrorFileID), budgets.CodeExceeded) {
		t.Fatalf("the batch's line on the spent budget: counts %+v, provider calls %d", b.RequestCounts, up.count()-before)
	}

	for _, tc := range []struct {
		name, method, path string
		body               []byte
		spends             bool
	}{
		{"chat", http.MethodPost, "/chat/completions", chat, true},
		{"list models", http.MethodGet, "/models", nil, false},
		{"list files", http.MethodGet, "/files", nil, false},
		{"read a file", http.MethodGet, "/files/" + f.ID, nil, false},
		{"read a file's content", http.MethodGet, "/files/" + f.ID + "/content", nil, false},
		{"list batches", http.MethodGet, "/batches", nil, false},
		{"read the batch", http.MethodGet, "/batches/" + b.ID, nil, false},
		{"read its errors", http.MethodGet, "/files/" + b.ErrorFileID + "/content", nil, false},
		{"cancel the batch", http.MethodPost, "/batches/" + b.ID + "/cancel", nil, false},
		{"read a batch that is not there", http.MethodGet, "/batches/batch_missing", nil, false},
		{"delete a file", http.MethodDelete, "/files/" + f.ID, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hdr
			if tc.spends {
				h = spend
			}
			resp, raw := rawDo(t, gatewayURL(), tc.method, tc.path, tc.body, h...)
			refused := resp.StatusCode == http.StatusPreconditionFailed
			if refused != tc.spends {
				t.Fatalf("%s %s on a spent budget: %d %s (want refused: %v)", tc.method, tc.path, resp.StatusCode, raw, tc.spends)
			}
			if refused && errCode(t, raw) != budgets.CodeExceeded {
				t.Fatalf("refused with %s", raw)
			}
		})
	}
}
