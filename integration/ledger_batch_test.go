package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestLedgerRecordsBatchLines runs a managed batch of three lines (one
// refused by the provider) and checks that each line is a ledger record
// of the batch creator's key, as a client request would be.
func TestLedgerRecordsBatchLines(t *testing.T) {
	up := fakeAnthropic(t, fixture(t, "anthropic", "response_text.json"), nil)
	loadSite(t, site{LLM: fmt.Sprintf("ledger %q", filepath.Join(t.TempDir(), "ledger.db"))})
	reloadSafeTransport.CloseIdleConnections()
	client := anthropicClient(up)
	ctx := context.Background()
	f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(3, 2)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, client, b.ID, openai.BatchStatusCompleted)
	syncLedger(t)
	var logs struct {
		Total int64
		Data  []struct {
			APIKey    string `json:"api_key"`
			Provider  string `json:"provider"`
			Model     string `json:"model"`
			Operation string `json:"operation"`
			Status    int    `json:"status"`
			Input     int64  `json:"input_tokens"`
		}
	}
	if code := getJSON(t, "/logs?page_size=100&ai_org_model=claude-sonnet-4-5,claude-unknown", gatewayKey, &logs); code != 200 {
		t.Fatalf("GET /v1/logs: %d", code)
	}
	ok, refused := 0, 0
	for _, l := range logs.Data {
		if l.APIKey != "test" || l.Provider != "anthropic" || l.Operation != "chat.completions" {
			t.Errorf("batch line record %+v", l)
		}
		switch {
		case l.Status == 200 && l.Input > 0:
			ok++
		case l.Status == 404:
			refused++
		}
	}
	if logs.Total != 3 || ok != 2 || refused != 1 {
		t.Errorf("%d batch line records (%d answered with usage, %d refused), want 3 (2, 1): %+v", logs.Total, ok, refused, logs.Data)
	}
}
