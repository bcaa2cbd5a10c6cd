package batches

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestSDKRoundTrip drives the files and batches APIs with openai-go, as a
// user would, against a server that serves them the way the gateway's
// handler does (ServeFiles, then ServeBatches).
func TestSDKRoundTrip(t *testing.T) {
	e := newEnv(t, Config{})
	defer e.engine.Stop()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.files.ServeFiles(w, r, e.caller.WorkspaceID) || e.engine.ServeBatches(w, r, e.caller, nil) {
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()

	f, err := client.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(bytes.NewReader(chatLines(3, 2)), "input.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{
		InputFileID:      f.ID,
		Endpoint:         openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow("immediate"),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(t, e.engine, b.ID, StatusCompleted)
	b, err = client.Batches.Get(ctx, b.ID)
	if err != nil || b.Status != openai.BatchStatusCompleted || b.RequestCounts.Total != 3 || b.RequestCounts.Completed != 2 || b.RequestCounts.Failed != 1 {
		t.Fatalf("batch %+v %v", b, err)
	}
	resp, err := client.Files.Content(ctx, b.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if strings.Count(string(out), "\n") != 2 || !strings.Contains(string(out), `"custom_id":"req-3"`) {
		t.Fatalf("output file %s", out)
	}
	page, err := client.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(10)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID {
		t.Fatalf("list %+v %v", page, err)
	}
	files, err := client.Files.List(ctx, openai.FileListParams{Purpose: openai.String("batch_output")})
	if err != nil || len(files.Data) != 2 {
		t.Fatalf("result files %+v %v", files, err)
	}
	if _, err := client.Batches.Cancel(ctx, b.ID); err == nil {
		t.Fatal("cancelling a completed batch succeeded")
	}
	_, err = client.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: "/v1/responses", CompletionWindow: "24h"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "endpoint" {
		t.Fatalf("bad endpoint: %v", err)
	}
	if _, err := client.Files.Delete(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
}
