// Native Bedrock batches (docs/batches.md, "Native batches"): a 24 h
// batch routed to Bedrock with a batch bucket and role set is one batch
// inference job over a JSONL file in S3, its output read back from S3 and
// translated into OpenAI's batch files, each line a ledger record at the
// batch price.

package integration

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// bedrockBatchSite loads a site whose virtual key bedrock-batch reaches
// up's runtime and control plane, with its batch bucket in up's S3.
func bedrockBatchSite(t *testing.T, up *fakeBedrockJobs, extra string) {
	t.Helper()
	loadSite(t, site{LLM: fmt.Sprintf(`ledger %q
		virtual_key bedrock-batch {
			provider bedrock
			clouda_access_key_id %s
			clouda_secret_access_key %s
			clouda_region us-west-2
			custom_host %s
			clouda_batch_s3_uri s3://%s/gateway/jobs
			clouda_batch_role_arn %s
			clouda_batch_s3_endpoint %s
		}
		%s`, filepath.Join(t.TempDir(), "ledger.db"), bedrockAKID, bedrockSecret, up.URL, bedrockBucket, bedrockRoleARN, up.s3.URL, extra)})
	reloadSafeTransport.CloseIdleConnections()
}

// oneModelInput is OpenAI batch lines for a job API that runs one model:
// custom_ids no provider takes as ids, a line the provider refuses
// ("reject"), a line without a model (refused by the on-demand
// translation) and a line of another model.
func oneModelInput(model, other string) []byte {
	lines := []string{
		`{"custom_id":"q/1 ü","method":"POST","url":"/v1/chat/completions","body":{"model":"` + model + `","max_tokens":16,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi 1"}]}}`,
		`{"custom_id":"req-2","method":"POST","url":"/v1/chat/completions","body":{"model":"` + model + `","max_tokens":16,"messages":[{"role":"user","content":"reject 2"}]}}`,
		`{"custom_id":"req-3","method":"POST","url":"/v1/chat/completions","body":{"model":"` + model + `","max_tokens":16,"messages":[{"role":"user","content":"hi 3"}]}}`,
		`{"custom_id":"req-4","method":"POST","url":"/v1/chat/completions","body":{"max_tokens":16,"messages":[{"role":"user","content":"hi 4"}]}}`,
		`{"custom_id":"req-5","method":"POST","url":"/v1/chat/completions","body":{"model":"` + other + `","max_tokens":16,"messages":[{"role":"user","content":"hi 5"}]}}`,
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// modelLines is n lines of model.
func modelLines(model string, n int) []byte {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":"hi %d"}]}}`+"\n", i, model, i)
	}
	return []byte(b.String())
}

// TestBatchNativeBedrock: the JSONL lands in S3 as one batch inference
// job of Converse records (no on-demand call), the files list every
// custom_id once with answers and errors in OpenAI's shape, and each line
// the job ran is one ledger record flagged with the batch, an answered
// one costing half the on-demand price.
func TestBatchNativeBedrock(t *testing.T) {
	up := newFakeBedrockJobs(t)
	bedrockBatchSite(t, up, "")
	client := newClient("x-gateway-virtual-key", "bedrock-batch")
	b := newNativeBatch(t, client, oneModelInput(bedrockModel, "amazon.nova-lite-v1:0"))
	b = waitBatch(t, client, b.ID, openai.BatchStatusCompleted)

	creates, _, _, runtime := up.counts()
	j := up.job()
	if creates != 1 || runtime != 0 || j == nil || len(j.records) != 3 || j.model != bedrockModel {
		t.Fatalf("provider saw %d job creates and %d runtime calls; want 1 job of the 3 lines of %s, no runtime call", creates, runtime, bedrockModel)
	}
	for _, r := range j.records {
		in := gjson.GetBytes(r, "modelInput")
		if !in.Get("messages.0.content.0.text").Exists() || in.Get("inferenceConfig.maxTokens").Int() != 16 || in.Get("model").Exists() {
			t.Fatalf("record not translated to a Converse request: %s", r)
		}
	}
	if sys := gjson.GetBytes(j.records[0], "modelInput.system.0.text").Str; sys != "Be brief." {
		t.Fatalf("the system prompt is not the Converse system block: %s", j.records[0])
	}
	if !strings.HasPrefix(j.input, "gateway/jobs/"+strings.ReplaceAll(b.ID, "_", "-")+"/") {
		t.Fatalf("input stored at %q, want under the configured prefix and the batch's folder", j.input)
	}
	if c := b.RequestCounts; c.Total != 5 || c.Completed != 2 || c.Failed != 3 {
		t.Fatalf("request_counts %+v, want 5 total, 2 completed, 3 failed", c)
	}
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 2 || len(errs) != 3 {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	for _, cid := range []string{"q/1 ü", "req-3"} {
		l := out[cid]
		if l.Get("response.status_code").Int() != 200 || l.Get("response.body.object").Str != "chat.completion" ||
			l.Get("response.body.choices.0.message.content").Str != "Hello from Bedrock!" || l.Get("response.body.usage.prompt_tokens").Int() != 2095 {
			t.Fatalf("output line %s: %s", cid, l.Raw)
		}
	}
	if l := errs["req-2"]; l.Get("response.status_code").Int() != 400 || !strings.Contains(l.Get("response.body.error.message").Str, "the prompt was refused") {
		t.Fatalf("the provider's refusal: %s", l.Raw)
	}
	if l := errs["req-4"]; l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.param").Str != "model" {
		t.Fatalf("the gateway's refusal: %s", l.Raw)
	}
	if l := errs["req-5"]; l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.code").Str != "batch_model_mismatch" {
		t.Fatalf("the other model's line: %s", l.Raw)
	}

	checkOneModelLedger(t, b.ID, "bedrock", bedrockModel)
}

// checkOneModelLedger checks the ledger of a oneModelInput batch: one
// record per line the job ran, flagged with the batch, an answered line
// (2,095 in, 503 out) costing half its on-demand price.
func checkOneModelLedger(t *testing.T, batchID, provider, model string) {
	t.Helper()
	syncLedger(t)
	var logs struct {
		Total int64
		Data  []struct {
			Provider string `json:"provider"`
			Model    string `json:"model"`
			Cost     int64  `json:"cost_nano_usd"`
			Known    bool   `json:"cost_known"`
			BatchID  string `json:"batch_id"`
			CustomID string `json:"custom_id"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100&ai_org_model="+url.QueryEscape(model), gatewayKey, &logs); code != 200 {
		t.Fatalf("GET /v1/logs: %d", code)
	}
	onDemand, known := cost.Builtin().Cost(provider, model, providers.Usage{PromptTokens: 2095, CompletionTokens: 503, TotalTokens: 2598})
	if !known {
		t.Fatalf("%s has no price", model)
	}
	answered, refused := 0, 0
	for _, r := range logs.Data {
		if r.BatchID != batchID || r.Provider != provider || r.Model != model {
			t.Fatalf("ledger record %+v is not a line of %s", r, batchID)
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
		t.Fatalf("%d ledger records (%d answered, %d refused), want the 3 lines the job ran: %+v", logs.Total, answered, refused, logs.Data)
	}
	t.Logf("one line of %s on %s (2095 in, 503 out): on demand $%.6f, native batch $%.6f", model, provider, onDemand, float64(int64(math.Round(onDemand/2*1e9)))/1e9)
}

// TestBatchNativeBedrockCancel: a cancel is StopModelInvocationJob; the
// record the job processed is delivered, the others are batch_cancelled.
func TestBatchNativeBedrockCancel(t *testing.T) {
	up := newFakeBedrockJobs(t)
	up.setHold(true)
	bedrockBatchSite(t, up, "")
	client := newClient("x-gateway-virtual-key", "bedrock-batch")
	b := newNativeBatch(t, client, modelLines(bedrockModel, 3))
	waitFor(t, "the job's creation", func() bool { _, gets, _, _ := up.counts(); return gets > 0 })
	if _, err := client.Batches.Cancel(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	b = waitBatch(t, client, b.ID, openai.BatchStatusCancelled)
	if creates, _, stops, _ := up.counts(); creates != 1 || stops != 1 {
		t.Fatalf("%d creates, %d stops; want 1 and 1", creates, stops)
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

// TestBatchNativeBedrockExpired: a job that timed out (status Expired,
// its later records unprocessed) is an expired batch whose unfinished
// lines are batch_expired in the error file.
func TestBatchNativeBedrockExpired(t *testing.T) {
	up := newFakeBedrockJobs(t)
	up.expireFrom = 2
	bedrockBatchSite(t, up, "")
	client := newClient("x-gateway-virtual-key", "bedrock-batch")
	b := newNativeBatch(t, client, modelLines(bedrockModel, 4))
	b = waitBatch(t, client, b.ID, openai.BatchStatusExpired)
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 2 || len(errs) != 2 || errs["req-3"].Get("error.code").Str != "batch_expired" || errs["req-4"].Get("error.code").Str != "batch_expired" {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	if c := b.RequestCounts; c.Total != 4 || c.Completed != 2 || c.Failed != 2 || b.ExpiredAt == 0 {
		t.Fatalf("request_counts %+v, expired_at %d", c, b.ExpiredAt)
	}
}

// TestBatchNativeBedrockNotReady: a Bedrock target without a batch
// bucket and role runs the batch managed, line by line through Converse.
func TestBatchNativeBedrockNotReady(t *testing.T) {
	up := newFakeBedrockJobs(t)
	bedrockSite(t, up.fakeBedrock)
	client := newClient("x-gateway-virtual-key", "bedrock-test")
	b := newNativeBatch(t, client, modelLines(bedrockModel, 2))
	waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	if creates, _, _, runtime := up.counts(); creates != 0 || runtime != 2 {
		t.Fatalf("%d job creates, %d runtime calls; want a managed run of 2 Converse calls", creates, runtime)
	}
}

// TestBatchNativeBedrockS3Refused: an S3 store that refuses the
// credentials fails the batch at submission with S3's answer, no job.
func TestBatchNativeBedrockS3Refused(t *testing.T) {
	up := newFakeBedrockJobs(t)
	loadSite(t, site{LLM: fmt.Sprintf(`virtual_key bedrock-batch {
			provider bedrock
			clouda_access_key_id AKIDOTHER
			clouda_secret_access_key %s
			custom_host %s
			clouda_batch_s3_uri s3://%s/gateway
			clouda_batch_role_arn %s
			clouda_batch_s3_endpoint %s
		}`, bedrockSecret, up.URL, bedrockBucket, bedrockRoleARN, up.s3.URL)})
	reloadSafeTransport.CloseIdleConnections()
	client := newClient("x-gateway-virtual-key", "bedrock-batch")
	b := newNativeBatch(t, client, modelLines(bedrockModel, 2))
	b = waitBatch(t, client, b.ID, openai.BatchStatusFailed)
	if creates, _, _, _ := up.counts(); creates != 0 {
		t.Fatalf("%d jobs created after S3 refused the input", creates)
	}
	if len(b.Errors.Data) == 0 || b.Errors.Data[0].Code != "native_submit_failed" || !strings.Contains(b.Errors.Data[0].Message, "S3 answered 403") {
		t.Fatalf("errors %+v", b.Errors.Data)
	}
	if strings.Contains(fmt.Sprint(b.Errors.Data), bedrockSecret) {
		t.Fatal("the secret is in the batch's errors")
	}
}
