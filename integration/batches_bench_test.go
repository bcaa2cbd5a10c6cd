package integration

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// BenchmarkBatchesManagedPipeline runs a managed "immediate" batch of 400
// chat lines through the whole pipeline (translation to Anthropic,
// routing, logs) against a local fake answering at once or after 5 ms,
// at the engine's default concurrency of 8 lines per batch, and reports
// lines/s. Compare with BenchmarkManagedBatch in ./batches (the engine
// with a runner that only sleeps).
func BenchmarkBatchesManagedPipeline(b *testing.B) {
	const lines = 400
	reply := fixture(b, "anthropic", "response_text.json")
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"instant", 0}, {"5ms", 5 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			up := newFakeServer(b, func(w http.ResponseWriter, r *http.Request, body []byte) {
				time.Sleep(c.delay)
				writeJSON(w, 200, reply)
			})
			loadProviderSite(b)
			client := anthropicClient(up)
			ctx := context.Background()
			f, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(batchInput(lines, 0)), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				bt, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: "immediate"})
				if err != nil {
					b.Fatal(err)
				}
				for bt.Status != openai.BatchStatusCompleted {
					time.Sleep(5 * time.Millisecond)
					if bt, err = client.Batches.Get(ctx, bt.ID); err != nil {
						b.Fatal(err)
					}
					if bt.Status == openai.BatchStatusFailed {
						b.Fatalf("batch failed: %+v", bt.Errors)
					}
				}
				if bt.RequestCounts.Completed != lines {
					b.Fatalf("counts %+v", bt.RequestCounts)
				}
			}
			b.ReportMetric(float64(lines*b.N)/time.Since(start).Seconds(), "lines/s")
		})
	}
}
