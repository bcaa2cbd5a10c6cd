// Native Vertex AI batches (docs/batches.md, "Native batches"): a 24 h
// batch routed to a Gemini model on Vertex AI with a batch bucket set is
// one batch prediction job over a JSONL file in Cloud Storage, its
// predictions read back and translated into OpenAI's batch files.

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

const vertexBatchModel = "gemini-2.5-flash"

// vertexBatchSite loads a site whose virtual key vertex-batch reaches
// up's API, with its batch bucket in up's Cloud Storage.
func vertexBatchSite(t *testing.T, up *fakeVertexBatches) {
	t.Helper()
	loadSite(t, site{LLM: fmt.Sprintf(`ledger %q
		virtual_key vertex-batch {
			provider vertex-ai
			api_key %s
			cloudc_project_id batch-project
			cloudc_region us-central1
			custom_host %s
			cloudc_batch_gcs_uri gs://%s/gateway/jobs
			cloudc_batch_gcs_endpoint %s
		}`, filepath.Join(t.TempDir(), "ledger.db"), vertexToken, up.URL, vertexBucket, up.gcs.URL)})
	reloadSafeTransport.CloseIdleConnections()
}

// TestBatchNativeVertex: the JSONL lands in Cloud Storage as one batch
// prediction job of generateContent requests (no on-demand call), the
// files list every custom_id once with answers and errors in OpenAI's
// shape, and the ledger has the job's lines at half the on-demand price.
func TestBatchNativeVertex(t *testing.T) {
	up := newFakeVertexBatches(t)
	vertexBatchSite(t, up)
	client := newClient("x-gateway-virtual-key", "vertex-batch")
	b := newNativeBatch(t, client, oneModelInput(vertexBatchModel, "gemini-2.0-flash"))
	b = waitBatch(t, client, b.ID, openai.BatchStatusCompleted)

	creates, _, _, onDemand := up.counts()
	j := up.job()
	if creates != 1 || onDemand != 0 || j == nil || len(j.lines) != 3 || j.model != vertexBatchModel {
		t.Fatalf("provider saw %d job creates and %d on-demand calls; want 1 job of the 3 lines of %s", creates, onDemand, vertexBatchModel)
	}
	for _, l := range j.lines {
		req := gjson.GetBytes(l, "request")
		if !req.Get("contents.0.parts.0.text").Exists() || req.Get("generationConfig.maxOutputTokens").Int() != 16 || req.Get("model").Exists() {
			t.Fatalf("line not translated to a generateContent request: %s", l)
		}
	}
	if sys := gjson.GetBytes(j.lines[0], "request.systemInstruction.parts.0.text").Str; sys != "Be brief." {
		t.Fatalf("the system prompt is not the systemInstruction: %s", j.lines[0])
	}
	if !strings.HasPrefix(j.input, vertexBucket+"/gateway/jobs/"+b.ID+"/") {
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
			l.Get("response.body.choices.0.message.content").Str != "Hello from Gemini!" || l.Get("response.body.usage.prompt_tokens").Int() != 2095 {
			t.Fatalf("output line %s: %s", cid, l.Raw)
		}
	}
	if l := errs["req-2"]; l.Get("response.status_code").Int() != 400 || !strings.Contains(l.Get("response.body.error.message").Str, "invalid argument") {
		t.Fatalf("the provider's refusal: %s", l.Raw)
	}
	if l := errs["req-4"]; l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.param").Str != "model" {
		t.Fatalf("the gateway's refusal: %s", l.Raw)
	}
	if l := errs["req-5"]; l.Get("response.body.error.code").Str != "batch_model_mismatch" {
		t.Fatalf("the other model's line: %s", l.Raw)
	}
	checkOneModelLedger(t, b.ID, "vertex-ai", vertexBatchModel)
}

// TestBatchNativeVertexCancel: a cancel is the job's :cancel; the line
// the job finished is delivered, the others are batch_cancelled.
func TestBatchNativeVertexCancel(t *testing.T) {
	up := newFakeVertexBatches(t)
	up.setHold(true)
	vertexBatchSite(t, up)
	client := newClient("x-gateway-virtual-key", "vertex-batch")
	b := newNativeBatch(t, client, modelLines(vertexBatchModel, 3))
	waitFor(t, "the job's creation", func() bool { _, gets, _, _ := up.counts(); return gets > 0 })
	if _, err := client.Batches.Cancel(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	b = waitBatch(t, client, b.ID, openai.BatchStatusCancelled)
	if creates, _, cancels, _ := up.counts(); creates != 1 || cancels != 1 {
		t.Fatalf("%d creates, %d cancels; want 1 and 1", creates, cancels)
	}
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 1 || out["req-1"].Get("response.status_code").Int() != 200 || len(errs) != 2 {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	for cid, l := range errs {
		if l.Get("error.code").Str != "batch_cancelled" {
			t.Fatalf("%s: %s", cid, l.Raw)
		}
	}
}

// TestBatchNativeVertexExpired: a job that expired with lines unfinished
// is an expired batch whose unfinished lines are batch_expired.
func TestBatchNativeVertexExpired(t *testing.T) {
	up := newFakeVertexBatches(t)
	up.expireFrom = 2
	vertexBatchSite(t, up)
	client := newClient("x-gateway-virtual-key", "vertex-batch")
	b := newNativeBatch(t, client, modelLines(vertexBatchModel, 4))
	b = waitBatch(t, client, b.ID, openai.BatchStatusExpired)
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 2 || len(errs) != 2 || errs["req-3"].Get("error.code").Str != "batch_expired" || errs["req-4"].Get("error.code").Str != "batch_expired" {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	if c := b.RequestCounts; c.Total != 4 || c.Completed != 2 || c.Failed != 2 {
		t.Fatalf("request_counts %+v", c)
	}
}

// TestBatchNativeVertexConfigTarget: a config target (x-gateway-config,
// client input) names the bucket; the job and storage calls go through
// the egress policy that admits the fakes' loopback addresses.
func TestBatchNativeVertexConfigTarget(t *testing.T) {
	up := newFakeVertexBatches(t)
	loadProviderSite(t)
	cfg, _ := json.Marshal(map[string]any{"provider": "vertex-ai", "api_key": vertexToken, "cloudc_project_id": "batch-project",
		"custom_host": up.URL, "cloudc_batch_gcs_uri": "gs://" + vertexBucket + "/cfg", "cloudc_batch_gcs_endpoint": up.gcs.URL})
	client := newClient("x-gateway-config", string(cfg))
	b := newNativeBatch(t, client, modelLines(vertexBatchModel, 2))
	b = waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	if creates, _, _, onDemand := up.counts(); creates != 1 || onDemand != 0 || b.RequestCounts.Completed != 2 {
		t.Fatalf("%d creates, %d on-demand calls, counts %+v", creates, onDemand, b.RequestCounts)
	}
	if j := up.job(); !strings.HasPrefix(j.input, vertexBucket+"/cfg/"+b.ID+"/") {
		t.Fatalf("input stored at %q", j.input)
	}
}
