// Native Gemini API batches (docs/batches.md, "Native batches"): a 24 h
// batch routed to the Gemini API is one batch mode job of inline
// requests, its inlined responses translated into OpenAI's batch files.

package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// geminiBatchSite loads a site whose virtual key gemini-batch reaches up.
func geminiBatchSite(t *testing.T, up *fakeGeminiBatches) {
	t.Helper()
	loadSite(t, site{LLM: fmt.Sprintf(`ledger %q
		virtual_key gemini-batch {
			provider google
			api_key %s
			custom_host %s
		}`, filepath.Join(t.TempDir(), "ledger.db"), googleKey, up.URL)})
	reloadSafeTransport.CloseIdleConnections()
}

// TestBatchNativeGemini: the JSONL lands as one batchGenerateContent job
// (no on-demand call), the files list every custom_id once, and the
// ledger has the job's lines at half the on-demand price.
func TestBatchNativeGemini(t *testing.T) {
	up := newFakeGeminiBatches(t)
	geminiBatchSite(t, up)
	client := newClient("x-gateway-virtual-key", "gemini-batch")
	b := newNativeBatch(t, client, oneModelInput(vertexBatchModel, "gemini-2.0-flash"))
	b = waitBatch(t, client, b.ID, openai.BatchStatusCompleted)

	creates, _, _, onDemand := up.counts()
	j := up.job()
	if creates != 1 || onDemand != 0 || j == nil || len(j.reqs) != 3 || j.model != vertexBatchModel {
		t.Fatalf("provider saw %d job creates and %d on-demand calls; want 1 job of the 3 lines of %s", creates, onDemand, vertexBatchModel)
	}
	for _, q := range j.reqs {
		if q.Get("request.generationConfig.maxOutputTokens").Int() != 16 || q.Get("request.model").Exists() {
			t.Fatalf("request not translated to a generateContent request: %s", q.Raw)
		}
	}
	if c := b.RequestCounts; c.Total != 5 || c.Completed != 2 || c.Failed != 3 {
		t.Fatalf("request_counts %+v, want 5 total, 2 completed, 3 failed", c)
	}
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 2 || len(errs) != 3 {
		t.Fatalf("output %v, errors %v", out, errs)
	}
	for _, cid := range []string{"q/1 ü", "req-3"} {
		if l := out[cid]; l.Get("response.body.choices.0.message.content").Str != "Hello from Gemini!" || l.Get("response.body.usage.completion_tokens").Int() != 503 {
			t.Fatalf("output line %s: %s", cid, l.Raw)
		}
	}
	if l := errs["req-2"]; l.Get("response.status_code").Int() != 400 || !strings.Contains(l.Get("response.body.error.message").Str, "invalid argument") {
		t.Fatalf("the provider's refusal: %s", l.Raw)
	}
	if l := errs["req-4"]; l.Get("response.body.error.param").Str != "model" {
		t.Fatalf("the gateway's refusal: %s", l.Raw)
	}
	if l := errs["req-5"]; l.Get("response.body.error.code").Str != "batch_model_mismatch" {
		t.Fatalf("the other model's line: %s", l.Raw)
	}
	checkOneModelLedger(t, b.ID, "google", vertexBatchModel)
}

// TestBatchNativeGeminiCancel: a cancel is the batch's :cancel.
func TestBatchNativeGeminiCancel(t *testing.T) {
	up := newFakeGeminiBatches(t)
	up.setHold(true)
	geminiBatchSite(t, up)
	client := newClient("x-gateway-virtual-key", "gemini-batch")
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
	if len(out) != 1 || len(errs) != 2 || errs["req-2"].Get("error.code").Str != "batch_cancelled" {
		t.Fatalf("output %v, errors %v", out, errs)
	}
}

// TestBatchNativeGeminiExpired: an expired batch mode job is an expired
// batch whose unfinished lines are batch_expired.
func TestBatchNativeGeminiExpired(t *testing.T) {
	up := newFakeGeminiBatches(t)
	up.expireFrom = 2
	geminiBatchSite(t, up)
	client := newClient("x-gateway-virtual-key", "gemini-batch")
	b := newNativeBatch(t, client, modelLines(vertexBatchModel, 4))
	b = waitBatch(t, client, b.ID, openai.BatchStatusExpired)
	out, errs := byCustomID(t, fileText(t, client, b.OutputFileID)), byCustomID(t, fileText(t, client, b.ErrorFileID))
	if len(out) != 2 || len(errs) != 2 || errs["req-4"].Get("error.code").Str != "batch_expired" {
		t.Fatalf("output %v, errors %v", out, errs)
	}
}
