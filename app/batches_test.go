package app

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/batches"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
)

type gateRunner struct{ gate chan struct{} }

func (g gateRunner) Run(ctx context.Context, _ batches.Caller, _, _ string, _ http.Header, _ []byte) (int, []byte, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	return 200, []byte(`{"object":"chat.completion"}`), nil
}

// TestBatchesSurviveReload runs a batch across a config reload: the new
// config's app provisions before the old one is cleaned up, as Caddy
// does, and the batch finishes on the shared engine.
func TestBatchesSurviveReload(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	storage := &certmagic.FileStorage{Path: t.TempDir()}
	newApp := func() *App {
		a := &App{storage: storage, logger: zap.NewNop()}
		if err := a.provisionBatches(); err != nil {
			t.Fatal(err)
		}
		a.startBatches()
		return a
	}
	old := newApp()
	gate := make(chan struct{})
	old.Batches().RegisterRunner("route", gateRunner{gate})
	caller := batches.Caller{Name: "k", WorkspaceID: "ws", Route: "route"}
	f, err := old.Files().Create(context.Background(), "ws", "in.jsonl", files.PurposeBatch,
		[]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := old.Batches().Create(context.Background(), caller, nil,
		[]byte(`{"input_file_id":"`+f.ID+`","endpoint":"/v1/chat/completions","completion_window":"immediate"}`))
	if err != nil {
		t.Fatal(err)
	}

	reloaded := newApp() // new config provisioned first
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if reloaded.Batches() != old.Batches() || reloaded.Batches().Stopped() {
		t.Fatal("reload replaced or stopped the batch engine")
	}
	close(gate)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := reloaded.Batches().Get(context.Background(), "ws", b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == batches.StatusCompleted && got.RequestCounts.Completed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch stuck in %s", got.Status)
		}
		time.Sleep(2 * time.Millisecond)
	}
	eng := reloaded.Batches()
	if err := reloaded.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if !eng.Stopped() {
		t.Fatal("the last config's cleanup did not stop the engine")
	}
}
