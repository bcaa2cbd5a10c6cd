package batches

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// clusterEnv is an env whose store is a Redis under a prefix of its own,
// with leases, so several engines play several gateway instances.
func clusterEnv(t *testing.T) *env {
	t.Helper()
	c := redistest.Client(t, 0)
	prefix := "llmgw:test:batches:" + uuid.NewString() + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		for it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
			c.Del(ctx, it.Val())
		}
	})
	return newEnvKV(t, Config{Instance: "A", Lease: 600 * time.Millisecond, CheckpointEvery: 1},
		kvstore.NewRedis(c, 0).WithPrefix(prefix))
}

// TestClusterTakeover: the owner of a 200-line batch dies mid-run (its
// engine stops without releasing the lease, as a killed process leaves
// it); another instance takes the batch over once the lease lapses and
// finishes it. Every custom_id is in the output exactly once, and no more
// lines run twice than were in flight at the crash (the concurrency, 8).
func TestClusterTakeover(t *testing.T) {
	e := clusterEnv(t)
	a := e.engine
	var started atomic.Int64
	a.cfg.Concurrency = 8
	e.runner.hook = func(ctx context.Context, body []byte) error {
		if started.Add(1) > 60 {
			<-ctx.Done() // the process dies while these run
			return ctx.Err()
		}
		return nil
	}
	b := e.create(t, a, e.upload(t, chatLines(200)), http.Header{"X-Gateway-Virtual-Key": {"vk"}})
	for started.Load() < 68 { // 60 done, 8 in flight
		time.Sleep(time.Millisecond)
	}
	runA := e.runner
	a.abandoned = true
	a.Stop()
	killed := time.Now()

	var firstB atomic.Int64
	e.runner = &fakeRunner{hook: func(context.Context, []byte) error {
		firstB.CompareAndSwap(0, time.Now().UnixNano())
		return nil
	}}
	other := e.newEngine(Config{Instance: "B", Lease: 600 * time.Millisecond, CheckpointEvery: 1})
	defer other.Stop()
	got := e.wait(t, other, b.ID, StatusCompleted)
	if got.RequestCounts != (RequestCounts{200, 200, 0}) {
		t.Fatalf("counts %+v", got.RequestCounts)
	}
	seen := map[string]int{}
	for _, l := range e.fileLines(t, got.OutputFileID) {
		seen[l.Get("custom_id").Str]++
	}
	for cid, n := range seen {
		if n != 1 {
			t.Fatalf("%s is in the output %d times", cid, n)
		}
	}
	if len(seen) != 200 {
		t.Fatalf("%d custom_ids in the output, want 200", len(seen))
	}
	ranA := map[string]bool{}
	runA.mu.Lock()
	for _, n := range runA.calls {
		ranA[n] = true
	}
	runA.mu.Unlock()
	twice := 0
	e.runner.mu.Lock()
	for _, n := range e.runner.calls {
		if ranA[n] {
			twice++
		}
	}
	e.runner.mu.Unlock()
	t.Logf("takeover %v after the owner died (lease 600ms); %d lines ran on both instances",
		time.Duration(firstB.Load()-killed.UnixNano()).Round(time.Millisecond), twice)
	if twice > 8 {
		t.Fatalf("%d lines ran twice, want at most the 8 in flight at the crash", twice)
	}
}

// TestClusterCancelAndCountsAnywhere: counts read on an instance that does
// not run the batch follow the owner's (stored by its lease watcher), and
// a cancel made there stops new lines on the owner: none starts after the
// owner saw the mark, and the batch ends cancelled with the in-flight
// lines' results.
func TestClusterCancelAndCountsAnywhere(t *testing.T) {
	e := clusterEnv(t)
	a := e.engine
	a.cfg.Concurrency, a.cfg.CheckpointEvery = 4, 1000 // only the watcher stores counts
	release := make(chan struct{})
	var started atomic.Int64
	e.runner.hook = func(ctx context.Context, body []byte) error {
		if started.Add(1) > 20 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	b := e.create(t, a, e.upload(t, chatLines(100)), http.Header{"X-Gateway-Virtual-Key": {"vk"}})
	for started.Load() < 24 { // 20 done, 4 waiting
		time.Sleep(time.Millisecond)
	}
	// B runs no batch of its own; its runner must never be called.
	runA := e.runner
	e.runner = &fakeRunner{}
	other := e.newEngine(Config{Instance: "B", Lease: 600 * time.Millisecond})
	defer other.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := other.Get(context.Background(), e.caller.WorkspaceID, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.RequestCounts.Completed == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts read on the other instance stay %+v, want 20 completed", got.RequestCounts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := other.Cancel(context.Background(), e.caller.WorkspaceID, b.ID); err != nil {
		t.Fatal(err)
	}
	for { // the owner sees the mark
		a.mu.Lock()
		j := a.running[b.ID]
		cancelled := j == nil || j.cancelled
		a.mu.Unlock()
		if cancelled {
			break
		}
		time.Sleep(time.Millisecond)
	}
	before := started.Load()
	close(release)
	got := e.wait(t, other, b.ID, StatusCancelled)
	if n := started.Load(); n != before {
		t.Fatalf("%d lines started on the owner after it saw the cancel", n-before)
	}
	if got.RequestCounts.Completed != 24 || got.RequestCounts.Failed != 76 || e.runner.count() != 0 {
		t.Fatalf("cancelled batch counts %+v (the other instance ran %d lines)", got.RequestCounts, e.runner.count())
	}
	skipped := 0
	for _, l := range e.fileLines(t, got.ErrorFileID) {
		if gjson.Get(l.Raw, "error.code").Str == "batch_cancelled" || gjson.Get(l.Raw, "response.body.error.code").Str == "batch_cancelled" {
			skipped++
		}
	}
	_ = runA
	if skipped != 76 {
		t.Fatalf("%d lines skipped as batch_cancelled, want 76", skipped)
	}
}

// TestFirstResults: a custom_id recorded twice (by an owner that lost its
// lease and the instance that ran the line again) is delivered once.
func TestFirstResults(t *testing.T) {
	l := func(cid string) string { return `{"custom_id":"` + cid + `","response":{}}` + "\n" }
	tests := []struct {
		name       string
		part       string
		seen, also []string
		want       string
	}{
		{"no duplicates", l("a") + l("b"), nil, nil, l("a") + l("b")},
		{"within a part", l("a") + l("b") + l("a"), nil, nil, l("a") + l("b")},
		{"seen in an earlier part", l("a") + l("b"), []string{"a"}, nil, l("b")},
		{"in the output file", l("a") + l("c"), nil, []string{"c"}, l("a")},
		{"last line without newline", l("a") + strings.TrimSuffix(l("a"), "\n"), nil, nil, l("a")},
	}
	set := func(ids []string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(firstResults([]byte(tc.part), set(tc.seen), set(tc.also))); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
