package integration

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
)

// providerJobsHook answers OpenAI's job APIs as a provider with them
// would; other paths fall through to the fake's default logic.
func providerJobsHook(w http.ResponseWriter, r *http.Request, _ []byte) bool {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/batches":
		writeJSON(w, 200, []byte(`{"id":"batch_prov_new","object":"batch","endpoint":"/v1/chat/completions","input_file_id":"file-abc","completion_window":"24h","status":"validating","created_at":1700000000,"request_counts":{"total":0,"completed":0,"failed":0}}`))
	case r.Method == http.MethodGet && r.URL.Path == "/v1/batches":
		writeJSON(w, 200, []byte(`{"object":"list","data":[`+
			`{"id":"batch_prov_2","object":"batch","endpoint":"/v1/chat/completions","input_file_id":"file-abc","completion_window":"24h","status":"completed","created_at":1000002,"request_counts":{"total":1,"completed":1,"failed":0}},`+
			`{"id":"batch_prov_1","object":"batch","endpoint":"/v1/chat/completions","input_file_id":"file-abc","completion_window":"24h","status":"completed","created_at":1000001,"request_counts":{"total":1,"completed":1,"failed":0}}`+
			`],"first_id":"batch_prov_2","last_id":"batch_prov_1","has_more":false}`))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/fine_tuning/jobs":
		writeJSON(w, 200, []byte(`{"id":"ftjob-prov","object":"fine_tuning.job","model":"gpt-4o-mini","training_file":"file-abc","status":"queued","created_at":1700000000}`))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/files":
		writeJSON(w, 200, []byte(`{"id":"file-prov","object":"file","bytes":3,"created_at":1700000000,"filename":"in.jsonl","purpose":"batch","status":"processed"}`))
	default:
		return false
	}
	return true
}

// TestBatchesProviderPassThrough sends valid job requests for OpenAI to
// the provider, and gateway file ids to the gateway's store.
func TestBatchesProviderPassThrough(t *testing.T) {
	up := newFakeOpenAI(t)
	up.Hook = providerJobsHook
	loadSite(t, site{})
	client := newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1")
	ctx := context.Background()
	seen := func() []string {
		up.mu.Lock()
		defer up.mu.Unlock()
		var s []string
		for _, r := range up.seen {
			s = append(s, r.Method+" "+r.Path)
		}
		return s
	}
	steps := []struct {
		name string
		call func() (string, error)
		want string // id answered
		hit  string // the provider's last request, "" for none
	}{
		{"batch create", func() (string, error) {
			b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: "file-abc", Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "24h"})
			if err != nil {
				return "", err
			}
			return b.ID, nil
		}, "batch_prov_new", "POST /v1/batches"},
		{"fine-tuning create", func() (string, error) {
			j, err := client.FineTuning.Jobs.New(ctx, openai.FineTuningJobNewParams{Model: "gpt-4o-mini", TrainingFile: "file-abc", Suffix: openai.String("x"),
				Method: openai.FineTuningJobNewParamsMethod{Type: "supervised"}})
			if err != nil {
				return "", err
			}
			return j.ID, nil
		}, "ftjob-prov", "POST /v1/fine_tuning/jobs"},
		{"file upload", func() (string, error) {
			f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("{}\n"), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
			if err != nil {
				return "", err
			}
			return f.ID, nil
		}, "file-prov", "POST /v1/files"},
	}
	for _, s := range steps {
		before := len(seen())
		id, err := s.call()
		if err != nil || id != s.want {
			t.Fatalf("%s: %q %v", s.name, id, err)
		}
		after := seen()
		if len(after) != before+1 || after[len(after)-1] != s.hit {
			t.Fatalf("%s: provider saw %v", s.name, after[before:])
		}
	}
	// A gateway file id is looked up in the gateway's store (and is not
	// this workspace's), never at the provider.
	before := len(seen())
	if _, err := client.Files.Get(ctx, "file-gw"+strings.Repeat("0", 32)); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("gateway file id: %v", err)
	}
	if n := len(seen()); n != before {
		t.Fatalf("provider called for a gateway file id")
	}
}

// TestBatchesListMergedPagination lists managed batches and the
// provider's together, newest first, page by page.
func TestBatchesListMergedPagination(t *testing.T) {
	anth := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	up := newFakeOpenAI(t)
	up.Hook = providerJobsHook
	loadProviderSite(t)
	ctx := context.Background()
	ac := anthropicClient(anth)
	f, err := ac.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(1, 0)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := ac.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"}); err != nil {
			t.Fatal(err)
		}
	}
	collect := func(client openai.Client) []openai.Batch {
		var all []openai.Batch
		params := openai.BatchListParams{Limit: openai.Int(2)}
		for {
			page, err := client.Batches.List(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Data) > 2 {
				t.Fatalf("page of %d, limit 2", len(page.Data))
			}
			all = append(all, page.Data...)
			if !page.HasMore {
				return all
			}
			params.After = openai.String(page.Data[len(page.Data)-1].ID)
		}
	}
	managed := collect(ac)
	merged := collect(newClient("x-gateway-provider", "openai", "x-gateway-custom-host", up.URL+"/v1"))
	if len(managed) < 3 || len(merged) != len(managed)+2 {
		t.Fatalf("managed %d, merged %d", len(managed), len(merged))
	}
	ids := map[string]bool{}
	for i, b := range merged {
		if ids[b.ID] {
			t.Fatalf("%s listed twice", b.ID)
		}
		ids[b.ID] = true
		// Within one second managed batches keep creation order, not id
		// order (TestBatchesHardeningListOrder checks it).
		if i > 0 && b.CreatedAt > merged[i-1].CreatedAt {
			t.Fatalf("not newest first at %d: %s after %s", i, b.ID, merged[i-1].ID)
		}
	}
	if merged[len(merged)-2].ID != "batch_prov_2" || merged[len(merged)-1].ID != "batch_prov_1" {
		t.Fatalf("provider batches not last: %s, %s", merged[len(merged)-2].ID, merged[len(merged)-1].ID)
	}
	for _, b := range managed {
		if !ids[b.ID] {
			t.Fatalf("managed %s missing from the merged list", b.ID)
		}
	}
}

// TestBatchesManagedCancelDuringRun cancels a batch while its first
// lines are held at the provider: they finish, the rest are cancelled.
func TestBatchesManagedCancelDuringRun(t *testing.T) {
	gate, started := make(chan struct{}), make(chan struct{}, 64)
	var calls atomic.Int32
	reply := fixture(t, "anthropic", "response_text.json")
	up := newFakeServer(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		calls.Add(1)
		started <- struct{}{}
		<-gate
		writeJSON(w, 200, reply)
	})
	loadProviderSite(t)
	client := anthropicClient(up)
	ctx := context.Background()
	const lines = 20
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(lines, 0)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	c, err := client.Batches.Cancel(ctx, b.ID)
	if err != nil || c.Status != openai.BatchStatusCancelling {
		t.Fatalf("cancel: %v %v", c, err)
	}
	close(gate)
	b = waitBatch(t, client, b.ID, openai.BatchStatusCancelled)
	n := int(calls.Load())
	rc := b.RequestCounts
	if rc.Total != lines || rc.Completed != int64(n) || rc.Failed != int64(lines-n) || n >= lines {
		t.Fatalf("counts %+v after %d provider calls", rc, n)
	}
	errs := strings.Split(strings.TrimSpace(fileText(t, client, b.ErrorFileID)), "\n")
	if len(errs) != lines-n || gjson.Get(errs[0], "error.code").Str != "batch_cancelled" {
		t.Fatalf("error file: %d lines, first %s", len(errs), errs[0])
	}
	if _, err := client.Batches.Cancel(ctx, b.ID); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("cancelling a cancelled batch: %v", err)
	}
}

// TestBatchesManagedLinesRunAsCaller checks that each line of a managed
// batch is a request of its own in the log, attributed to the key that
// created the batch, though the batch holds no gateway key.
func TestBatchesManagedLinesRunAsCaller(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadProviderSite(t)
	client := anthropicClient(up)
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(2, 0)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	lines := 0
	for _, l := range gatewayLogLines(t) {
		if gjson.Get(l, "endpoint").Str != "chat.completions" {
			continue
		}
		lines++
		if gjson.Get(l, "api_key_name").Str != "test" || gjson.Get(l, "provider").Str != "anthropic" || gjson.Get(l, "status").Int() != 200 {
			t.Fatalf("line logged as %s", l)
		}
		if strings.Contains(l, gatewayKey) {
			t.Fatal("gateway key in the log")
		}
	}
	if lines != 2 {
		t.Fatalf("%d chat entries logged, want 2", lines)
	}
}

// TestBatchesFineTuningProviderChecks refuses fine-tuning for requests
// that name no single provider with fine-tuning, before any call.
func TestBatchesFineTuningProviderChecks(t *testing.T) {
	anth := fakeAnthropic(t, nil, nil)
	loadProviderSite(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		client openai.Client
		param  string
		want   string // in the message
	}{
		{"no routing headers", newClient(), "x-gateway-provider", "no provider"},
		{"two targets", newClient("x-gateway-config", `{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"sk-a"},{"provider":"anthropic","api_key":"sk-b"}]}`), "provider", "single provider target"},
		{"anthropic", anthropicClient(anth), "provider", "anthropic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.client.FineTuning.Jobs.New(ctx, openai.FineTuningJobNewParams{Model: "m", TrainingFile: "file-abc", Suffix: openai.String("x"),
				Method: openai.FineTuningJobNewParamsMethod{Type: "supervised"}})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tt.param || !strings.Contains(apiErr.Message, tt.want) {
				t.Fatalf("create: %v %s", err, apiErr.RawJSON())
			}
			_, err = tt.client.FineTuning.Jobs.List(ctx, openai.FineTuningJobListParams{})
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tt.param {
				t.Fatalf("list: %v", err)
			}
		})
	}
	anth.mu.Lock()
	defer anth.mu.Unlock()
	if len(anth.seen) != 0 {
		t.Fatalf("provider called %d times", len(anth.seen))
	}
}
