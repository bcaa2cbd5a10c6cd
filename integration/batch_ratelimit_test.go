// Managed batch lines pass the rate limits of the route their batch was
// created on (llm_ratelimit's admission stage, app.Admission), as the
// batch's creator, with token policies settled against each line's usage.

package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

// rlBatch uploads n chat lines (none failing) with key and runs them as an
// immediate managed batch through the fake Anthropic up, returning the
// finished batch and its client.
func rlBatch(t *testing.T, up *fakeServer, key string, n int) (*openai.Batch, openai.Client) {
	t.Helper()
	client := anthropicClient(up, "x-gateway-api-key", key)
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(n, 0)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	return waitBatch(t, client, b.ID, openai.BatchStatusCompleted), client
}

func providerCalls(up *fakeServer) int {
	up.mu.Lock()
	defer up.mu.Unlock()
	return len(up.seen)
}

// TestBatchLinesPassRouteRateLimit: a Caddyfile policy of 2 requests a
// minute on the model lets two of three lines reach the provider; the
// third is a 429 line in the error file, in the limiter's envelope.
func TestBatchLinesPassRouteRateLimit(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	name := "batch-lines-" + uuid.NewString()
	loadRL(t, rlSite{Limit: fmt.Sprintf(`
			policy %s {
				type requests
				unit rpm
				value 2
				condition model claude-sonnet-4-5
			}`, name)})
	b, client := rlBatch(t, up, gatewayKey, 3)
	if b.RequestCounts.Total != 3 || b.RequestCounts.Completed != 2 || b.RequestCounts.Failed != 1 {
		t.Fatalf("counts %+v", b.RequestCounts)
	}
	if calls := providerCalls(up); calls != 2 {
		t.Fatalf("provider calls %d, want 2", calls)
	}
	errs := fileText(t, client, b.ErrorFileID)
	if gjson.Get(errs, "response.status_code").Int() != 429 ||
		gjson.Get(errs, "response.body.error.code").Str != "rate_limit_exceeded" ||
		!strings.Contains(gjson.Get(errs, "response.body.error.message").Str, name) {
		t.Fatalf("error file %s", errs)
	}
}

// TestBatchLinesAPIPolicyTenancy: an API policy of workspace A limits A's
// batch lines and not those of a key in workspace B.
func TestBatchLinesAPIPolicyTenancy(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadRL(t, rlSite{})
	createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":1,"conditions":[{"key":"model","value":"claude-sonnet-4-5"}],"group_by":[{"key":"api_key"}]}`)
	a, _ := rlBatch(t, up, gatewayKey, 3)
	if a.RequestCounts.Completed != 1 || a.RequestCounts.Failed != 2 {
		t.Fatalf("workspace A counts %+v", a.RequestCounts)
	}
	b, _ := rlBatch(t, up, rlOtherKey, 3)
	if b.RequestCounts.Completed != 3 || b.RequestCounts.Failed != 0 {
		t.Fatalf("workspace B counts %+v", b.RequestCounts)
	}
	if calls := providerCalls(up); calls != 4 {
		t.Fatalf("provider calls %d, want 4", calls)
	}
}

// TestBatchLinesSettleTokens: a token policy is charged a line's reported
// usage (2,095 + 503 tokens in the fixture), not its reservation, as the
// next client request's x-ratelimit-remaining-tokens shows.
func TestBatchLinesSettleTokens(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadRL(t, rlSite{Limit: fmt.Sprintf(`
			policy tokens-%s {
				type tokens
				unit rpm
				value 10000
				condition model claude-sonnet-4-5
			}`, uuid.NewString())})
	b, _ := rlBatch(t, up, gatewayKey, 1)
	if b.RequestCounts.Completed != 1 {
		t.Fatalf("counts %+v", b.RequestCounts)
	}
	body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, gatewayURL()+"/chat/completions", strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Authorization": "Bearer sk-test-provider",
		"x-gateway-api-key": gatewayKey, "x-gateway-provider": "anthropic", "x-gateway-custom-host": up.URL} {
		req.Header.Set(k, v)
	}
	resp, err := rlClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// This request reserves ceil(size/4) + max_tokens; the line's usage
	// was settled before it.
	want := 10000 - (2095 + 503) - ((len(body)+3)/4 + 16)
	if got, _ := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-tokens")); resp.StatusCode != 200 || got != want {
		t.Fatalf("status %d, remaining tokens %q, want %d", resp.StatusCode, resp.Header.Get("x-ratelimit-remaining-tokens"), want)
	}
}
