// Native Anthropic batches (docs/batches.md, "Native batches"): a 24 h
// batch routed to Anthropic is one Message Batches job, its results
// translated back into OpenAI's batch files, each line a ledger record
// at the batch price.

package integration

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// nativeInput is OpenAI batch lines: custom_ids Anthropic would refuse
// (a slash, a space, a non-ASCII letter), a model the provider does not
// know (errored at the provider) and a line without a model (refused by
// the gateway's translation, as the same on-demand request is).
func nativeInput() []byte {
	lines := []string{
		`{"custom_id":"q/1 ü","method":"POST","url":"/v1/chat/completions","body":{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi 1"}]}}`,
		`{"custom_id":"req-2","method":"POST","url":"/v1/chat/completions","body":{"model":"claude-unknown","max_tokens":16,"messages":[{"role":"user","content":"hi 2"}]}}`,
		`{"custom_id":"req-3","method":"POST","url":"/v1/chat/completions","body":{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi 3"}]}}`,
		`{"custom_id":"req-4","method":"POST","url":"/v1/chat/completions","body":{"max_tokens":16,"messages":[{"role":"user","content":"hi 4"}]}}`,
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// byCustomID indexes a result file's lines, failing on a custom_id
// listed twice.
func byCustomID(t *testing.T, text string) map[string]gjson.Result {
	t.Helper()
	out := map[string]gjson.Result{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		r := gjson.Parse(l)
		cid := r.Get("custom_id").Str
		if _, dup := out[cid]; dup {
			t.Fatalf("custom_id %q listed twice", cid)
		}
		out[cid] = r
	}
	return out
}

func newNativeBatch(t *testing.T, client openai.Client, input []byte, opts ...option.RequestOption) *openai.Batch {
	t.Helper()
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(input), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "24h"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBatchNativeAnthropic: the JSONL lands as one Message Batches job
// (no on-demand call), the files list every custom_id once with answers
// and errors in OpenAI's shape, and each answered line is one ledger
// record flagged with the batch, costing half the on-demand price.
func TestBatchNativeAnthropic(t *testing.T) {
	reply := fixture(t, "anthropic", "response_text.json")
	up := newFakeMessageBatches(t, reply)
	loadSite(t, site{LLM: fmt.Sprintf("ledger %q", filepath.Join(t.TempDir(), "ledger.db"))})
	reloadSafeTransport.CloseIdleConnections()
	client := anthropicClient(up.fakeServer)
	b := newNativeBatch(t, client, nativeInput())
	b = waitBatch(t, client, b.ID, openai.BatchStatusCompleted)

	creates, _, _, messages := up.counts()
	if creates != 1 || messages != 0 || up.job() == nil || len(up.job().reqs) != 3 {
		t.Fatalf("provider saw %d job creates and %d Messages calls; want 1 job of the 3 lines that translate, no Messages call (counts %+v)", creates, messages, b.RequestCounts)
	}
	for _, q := range up.job().reqs {
		if gjson.GetBytes(q.Params, "messages.0.content").Exists() == false || gjson.GetBytes(q.Params, "max_tokens").Int() != 16 {
			t.Fatalf("line not translated to a Messages request: %s", q.Params)
		}
	}
	if c := b.RequestCounts; c.Total != 4 || c.Completed != 2 || c.Failed != 2 {
		t.Fatalf("request_counts %+v, want 4 total, 2 completed, 2 failed", c)
	}
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 2 || len(errs) != 2 {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	for _, cid := range []string{"q/1 ü", "req-3"} {
		l := out[cid]
		if l.Get("response.status_code").Int() != 200 || l.Get("response.body.object").Str != "chat.completion" ||
			l.Get("response.body.choices.0.message.content").Str != "Hi! My name is Claude." || l.Get("response.body.usage.prompt_tokens").Int() != 2095 {
			t.Fatalf("output line %s: %s", cid, l.Raw)
		}
	}
	if l := errs["req-2"]; l.Get("response.status_code").Int() != 404 || !strings.Contains(l.Get("response.body.error.message").Str, "claude-unknown") {
		t.Fatalf("the provider's refusal: %s", l.Raw)
	}
	if l := errs["req-4"]; l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.param").Str != "model" {
		t.Fatalf("the gateway's refusal: %s", l.Raw)
	}

	syncLedger(t)
	var logs struct {
		Total int64
		Data  []struct {
			Provider string `json:"provider"`
			Model    string `json:"model"`
			Status   int    `json:"status"`
			Cost     int64  `json:"cost_nano_usd"`
			Known    bool   `json:"cost_known"`
			BatchID  string `json:"batch_id"`
			CustomID string `json:"custom_id"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100&ai_org_model=claude-sonnet-4-5,claude-unknown", gatewayKey, &logs); code != 200 {
		t.Fatalf("GET /v1/logs: %d", code)
	}
	onDemand, known := cost.Builtin().Cost("anthropic", "claude-sonnet-4-5", providers.Usage{PromptTokens: 2095, CompletionTokens: 503, TotalTokens: 2598})
	if !known {
		t.Fatal("claude-sonnet-4-5 has no price")
	}
	answered, refused := 0, 0
	for _, r := range logs.Data {
		if r.BatchID != b.ID || r.Provider != "anthropic" {
			t.Fatalf("ledger record %+v is not a line of %s", r, b.ID)
		}
		switch r.CustomID {
		case "q/1 ü", "req-3":
			answered++
			if want := int64(math.Round(onDemand / 2 * 1e9)); !r.Known || r.Cost != want {
				t.Fatalf("line %s costs %d nano-USD, want %d (half of the on-demand %d)", r.CustomID, r.Cost, want, int64(math.Round(onDemand*1e9)))
			}
		case "req-2":
			refused++
		}
	}
	if logs.Total != 3 || answered != 2 || refused != 1 {
		t.Fatalf("%d ledger records (%d answered, %d refused), want the 3 lines the provider ran: %+v", logs.Total, answered, refused, logs.Data)
	}
	t.Logf("one line of claude-sonnet-4-5 (2095 in, 503 out): on demand $%.6f, native batch $%.6f", onDemand, float64(int64(math.Round(onDemand/2*1e9)))/1e9)
}

// TestBatchNativeAnthropicCancel: a cancel is the provider's cancel; the
// line that ran is delivered, the others are batch_cancelled.
func TestBatchNativeAnthropicCancel(t *testing.T) {
	up := newFakeMessageBatches(t, fixture(t, "anthropic", "response_text.json"))
	up.setHold(true)
	loadProviderSite(t)
	client := anthropicClient(up.fakeServer)
	b := newNativeBatch(t, client, batchInput(3, 0))
	waitFor(t, "the job's creation", func() bool { _, gets, _, _ := up.counts(); return gets > 0 })
	if _, err := client.Batches.Cancel(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	b = waitBatch(t, client, b.ID, openai.BatchStatusCancelled)
	if creates, _, cancels, _ := up.counts(); creates != 1 || cancels != 1 {
		t.Fatalf("%d creates, %d provider cancels; want 1 and 1", creates, cancels)
	}
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 1 || out["req-1"].Get("response.status_code").Int() != 200 || len(errs) != 2 {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	for cid, l := range errs {
		if l.Get("error.code").Str != "batch_cancelled" || l.Get("response").Type != gjson.Null {
			t.Fatalf("%s: %s", cid, l.Raw)
		}
	}
	if c := b.RequestCounts; c.Total != 3 || c.Completed != 1 || c.Failed != 2 {
		t.Fatalf("request_counts %+v", c)
	}
}

// TestBatchNativeAnthropicExpired: a job that ended with lines expired
// (the provider's 24 h window) is an expired batch whose unfinished
// lines are batch_expired in the error file.
func TestBatchNativeAnthropicExpired(t *testing.T) {
	up := newFakeMessageBatches(t, fixture(t, "anthropic", "response_text.json"))
	up.expireFrom = 2
	loadProviderSite(t)
	client := anthropicClient(up.fakeServer)
	b := newNativeBatch(t, client, batchInput(4, 0))
	b = waitBatch(t, client, b.ID, openai.BatchStatusExpired)
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 2 || len(errs) != 2 || errs["req-3"].Get("error.code").Str != "batch_expired" || errs["req-4"].Get("error.code").Str != "batch_expired" {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	if c := b.RequestCounts; c.Total != 4 || c.Completed != 2 || c.Failed != 2 || b.ExpiredAt == 0 {
		t.Fatalf("request_counts %+v, expired_at %d", c, b.ExpiredAt)
	}
}

// TestBatchNativeManagedMode: batch_mode managed keeps today's run, line
// by line through the Messages API.
func TestBatchNativeManagedMode(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadSite(t, site{Gateway: "custom_host_allow loopback\n\t\tbatch_mode managed"})
	reloadSafeTransport.CloseIdleConnections()
	client := anthropicClient(up)
	b := newNativeBatch(t, client, batchInput(2, 0))
	waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.seen) != 2 || up.seen[0].Path != "/v1/messages" {
		t.Fatalf("managed mode made %d calls (%v)", len(up.seen), up.seen)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestBatchNativeAnthropicOwnerKilled: a gateway binary (A) submits the
// job and polls it; it is killed with SIGKILL while the job runs, and
// this process's Caddy (B, sharing A's Redis) takes the batch over once
// A's lease lapses, polls the job A created (no second submission) and
// delivers its results.
func TestBatchNativeAnthropicOwnerKilled(t *testing.T) {
	requireRedis(t)
	bin := buildGateway(t)
	up := newFakeMessageBatches(t, fixture(t, "anthropic", "response_text.json"))
	up.setHold(true)
	llm := redisBlock(false) + fmt.Sprintf("\n\t\tvirtual_key vk-native {\n\t\t\tprovider anthropic\n\t\t\tapi_key %s\n\t\t\tcustom_host %s\n\t\t}", anthropicKey, up.URL) +
		"\n\t\tbatches {\n\t\t\tlease 2s\n\t\t}"
	portA := freePort()
	dir := t.TempDir()
	siteA := rlSite{Redis: llm, Storage: filepath.Join(dir, "storage"), HTTPPort: portA, AdminPort: freePort(),
		Log: filepath.Join(dir, "a.log"), NoLimiter: true}
	a := startGateway(t, bin, dir, siteA.caddyfile(), portA)
	client := func(base string) openai.Client {
		return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
			option.WithHeader("x-gateway-api-key", gatewayKey))
	}
	clientA := client(fmt.Sprintf("http://127.0.0.1:%d/v1", portA))
	b := newNativeBatch(t, clientA, batchInput(50, 7), option.WithHeader("x-gateway-virtual-key", "vk-native"))
	// A polls the job at least twice: it recorded the job and runs it.
	waitFor(t, "A polling the job", func() bool { _, gets, _, _ := up.counts(); return gets >= 2 })
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	up.setHold(false)

	loadRL(t, rlSite{Redis: llm, NoLimiter: true})
	clientB := client(gatewayURL())
	var got *openai.Batch
	var err error
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got, err = clientB.Batches.Get(context.Background(), b.ID); err != nil {
			t.Fatal(err)
		}
		if got.Status == openai.BatchStatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s after A was killed: %+v", got.Status, got.RequestCounts)
		}
	}
	if creates, _, _, messages := up.counts(); creates != 1 || messages != 0 {
		t.Fatalf("the job was created %d times (%d Messages calls); a takeover must not submit again", creates, messages)
	}
	out, errs := byCustomID(t, fileText(t, clientB, got.OutputFileID)), byCustomID(t, fileText(t, clientB, got.ErrorFileID))
	if len(out) != 49 || len(errs) != 1 || errs["req-7"].Get("response.status_code").Int() != 404 {
		t.Fatalf("%d output lines, %d error lines (%v)", len(out), len(errs), errs)
	}
	if c := got.RequestCounts; c.Total != 50 || c.Completed != 49 || c.Failed != 1 {
		t.Fatalf("request_counts %+v", c)
	}
}
