package batches

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/files"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// TestRedisBackend runs a batch and a restart resume with records and
// files in Redis, as a cluster of gateways shares them.
func TestRedisBackend(t *testing.T) {
	kv := files.NewRedisKV(redistest.Client(t, 0))
	prefix := "test/batches/" + randHex(8)
	t.Cleanup(func() {
		keys, _ := kv.List(context.Background(), prefix, true)
		for _, k := range keys {
			_ = kv.Delete(context.Background(), k)
		}
	})
	e := newEnvKV(t, Config{Prefix: prefix, Concurrency: 1, CheckpointEvery: 1}, kv)
	third := make(chan struct{})
	e.runner.hook = func(ctx context.Context, body []byte) error {
		if gjson.GetBytes(body, "n").Int() == 3 {
			close(third)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	b := e.create(t, e.engine, e.upload(t, chatLines(4, 2)), http.Header{"X-Gateway-Virtual-Key": {"vk"}})
	<-third
	e.engine.Stop()
	e.runner = &fakeRunner{}
	eng2 := e.newEngine(Config{Prefix: prefix})
	defer eng2.Stop()
	b = e.wait(t, eng2, b.ID, StatusCompleted)
	calls := append([]string(nil), e.runner.calls...)
	sort.Strings(calls)
	if b.RequestCounts != (RequestCounts{4, 3, 1}) || strings.Join(calls, ",") != "3,4" {
		t.Fatalf("counts %+v, resumed calls %v", b.RequestCounts, calls)
	}
	if len(e.fileLines(t, b.OutputFileID)) != 3 || len(e.fileLines(t, b.ErrorFileID)) != 1 {
		t.Fatal("result files")
	}
	p, err := eng2.List(context.Background(), e.caller.WorkspaceID, ListParams{})
	if err != nil || len(p.Data) != 1 {
		t.Fatalf("list %+v %v", p, err)
	}
	// Parts are gone once the batch finished.
	keys, _ := kv.List(context.Background(), prefix, true)
	for _, k := range keys {
		if strings.Contains(k, ".parts/") {
			t.Fatalf("part left: %s", k)
		}
	}
	if len(keys) == 0 {
		t.Fatal("no keys under the prefix")
	}
}
