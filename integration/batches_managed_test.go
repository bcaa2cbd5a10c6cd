// Managed batches, provider job checks and fine-tuning routing, end to
// end through the handler's /v1/files, /v1/batches and /v1/fine_tuning
// routing (see docs/batches.md).

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

// batchInput is n chat lines for Anthropic; line k of failing asks for a
// model the fake does not know (a 404 from the provider).
func batchInput(n int, failing int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		model := "claude-sonnet-4-5"
		if i == failing {
			model = "claude-unknown"
		}
		fmt.Fprintf(&b, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":"hi %d"}]}}`+"\n", i, model, i)
	}
	return b.Bytes()
}

func waitBatch(t *testing.T, client openai.Client, id string, status openai.BatchStatus) *openai.Batch {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := client.Batches.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status == status {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch stuck in %s, want %s", b.Status, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fileText(t *testing.T, client openai.Client, id string) string {
	t.Helper()
	resp, err := client.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestBatchesManagedImmediateAnthropic(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadProviderSite(t)
	client := anthropicClient(up)
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(3, 2)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	up.mu.Lock()
	uploadCalls := len(up.seen)
	up.mu.Unlock()
	if !strings.HasPrefix(f.ID, "file-gw") || uploadCalls != 0 {
		t.Fatalf("upload went to the provider: %s, %d calls", f.ID, uploadCalls)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	b = waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	if b.RequestCounts.Total != 3 || b.RequestCounts.Completed != 2 || b.RequestCounts.Failed != 1 {
		t.Fatalf("counts %+v", b.RequestCounts)
	}
	up.mu.Lock()
	calls := len(up.seen)
	up.mu.Unlock()
	if calls != 3 {
		t.Fatalf("provider calls %d, want 3", calls)
	}
	out, errs := fileText(t, client, b.OutputFileID), fileText(t, client, b.ErrorFileID)
	if strings.Count(out, "\n") != 2 || gjson.Get(strings.Split(out, "\n")[0], "response.body.object").Str != "chat.completion" {
		t.Fatalf("output file %s", out)
	}
	if gjson.Get(errs, "custom_id").Str != "req-2" || gjson.Get(errs, "response.status_code").Int() != 404 {
		t.Fatalf("error file %s", errs)
	}
	page, err := client.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(1)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID {
		t.Fatalf("list %+v %v", page, err)
	}
}

// TestBatchesManagedSurvivesReload reloads the config while a line runs.
func TestBatchesManagedSurvivesReload(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	reply := fixture(t, "anthropic", "response_text.json")
	up := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		once.Do(func() { close(started); <-gate })
		writeJSON(w, 200, reply)
	})
	loadProviderSite(t)
	client := anthropicClient(up)
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(3, 0)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	loadFresh(t, site{})
	close(gate)
	client = anthropicClient(up)
	b = waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	if b.RequestCounts.Completed != 3 {
		t.Fatalf("counts after reload %+v", b.RequestCounts)
	}
}

func TestBatchesChecksBeforeProvider(t *testing.T) {
	up := newFakeOpenAI(t)
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1")
	ctx := context.Background()
	_, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: "file-abc", Endpoint: "/v1/responses", CompletionWindow: "24h"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "endpoint" {
		t.Fatalf("bad endpoint: %v", err)
	}
	_, err = client.FineTuning.Jobs.New(ctx, openai.FineTuningJobNewParams{Model: "gpt-4o-mini", TrainingFile: "file-abc"})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "suffix" {
		t.Fatalf("fine-tuning without suffix: %v", err)
	}
	up.mu.Lock()
	n := len(up.seen)
	up.mu.Unlock()
	if n != 0 {
		t.Fatalf("provider called %d times for invalid requests", n)
	}
	anth := fakeAnthropic(t, nil, nil)
	anthClient := anthropicClient(anth)
	_, err = anthClient.FineTuning.Jobs.New(ctx, openai.FineTuningJobNewParams{Model: "claude", TrainingFile: "file-gw0", Suffix: openai.String("x"),
		Method: openai.FineTuningJobNewParamsMethod{Type: "supervised"}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "anthropic") {
		t.Fatalf("fine-tuning on anthropic: %v", err)
	}
}
