package ledger

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// blockingStore holds every Insert until release is closed.
type blockingStore struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
	fail    bool
}

func (s *blockingStore) Insert(ctx context.Context, recs []Record) error {
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("refused")
	}
	s.got += len(recs)
	return nil
}
func (s *blockingStore) Sweep(context.Context, time.Time) (int64, error) { return 0, nil }
func (s *blockingStore) Close() error                                    { return nil }

func TestFullQueueDropsWithoutBlocking(t *testing.T) {
	st := &blockingStore{release: make(chan struct{})}
	l := New(st, Config{Queue: 4, Batch: 1})
	before := testutil.ToFloat64(recordsDropped)
	e := &observe.Entry{TraceID: "t", Workspace: "w", Start: time.Now()}
	// The writer holds at most one batch (1 record) in Insert; the queue
	// holds 4 more; the remaining 5 of these 10 are dropped, and Record
	// returns every time (the test would hang otherwise).
	for i := 0; i < 10; i++ {
		l.Record(e)
	}
	dropped := testutil.ToFloat64(recordsDropped) - before
	if dropped < 5 || dropped > 6 {
		t.Errorf("dropped %v records, want 5 or 6 (queue 4, one in the writer)", dropped)
	}
	close(st.release)
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if float64(st.got)+dropped != 10 {
		t.Errorf("written %d + dropped %v != 10 recorded", st.got, dropped)
	}
	// Recording after Close neither panics nor blocks.
	l.Record(e)
}

func TestRefusedBatchIsCountedAndDropped(t *testing.T) {
	st := &blockingStore{release: make(chan struct{}), fail: true}
	close(st.release)
	l := New(st, Config{})
	errs := testutil.ToFloat64(writeErrors)
	l.Record(&observe.Entry{Workspace: "w", Start: time.Now()})
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(writeErrors) - errs; got != 1 {
		t.Errorf("write errors +%v, want +1", got)
	}
	l.Close()
}

func TestNilLedgerRecordsNothing(t *testing.T) {
	var l *Ledger
	l.Record(&observe.Entry{})
	if l.Store() != nil || l.Close() != nil || l.Sync(context.Background()) != nil {
		t.Error("nil ledger did something")
	}
}

func TestFromEntry(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	big := map[string]string{}
	for i := 0; i < 40; i++ {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))+strings.Repeat("k", 200)] = strings.Repeat("v", 1000)
	}
	for _, tc := range []struct {
		name  string
		e     observe.Entry
		check func(*testing.T, *Record)
	}{
		{"priced usage", observe.Entry{Start: start, FirstByte: start.Add(time.Second), Status: 200, CostUSD: 0.0000012345, CostKnown: true,
			Usage:    &providers.Usage{PromptTokens: 7, CompletionTokens: 3, CachedTokens: 2, CacheWriteTokens: 1, ReasoningTokens: 4},
			Attempts: []observe.Attempt{{}, {}, {}}},
			func(t *testing.T, r *Record) {
				if r.CostNanoUSD != 1235 || !r.CostKnown || r.InputTokens != 7 || r.OutputTokens != 3 || r.ReasoningTokens != 4 ||
					r.Retries != 2 || r.TTFT != time.Second || r.Latency != 2*time.Second {
					t.Errorf("%+v", r)
				}
			}},
		{"provider error class", observe.Entry{Start: start, Status: 400, ErrorType: string(providers.ErrContextLength)},
			func(t *testing.T, r *Record) {
				if r.ErrorType != "context_length_exceeded" {
					t.Errorf("error type %q", r.ErrorType)
				}
			}},
		{"unpriced usage", observe.Entry{Start: start, Usage: &providers.Usage{PromptTokens: 1}},
			func(t *testing.T, r *Record) {
				if r.CostKnown {
					t.Error("unpriced usage has a known cost")
				}
			}},
		{"no usage", observe.Entry{Start: start, Status: 401},
			func(t *testing.T, r *Record) {
				if !r.CostKnown || r.CostNanoUSD != 0 {
					t.Error("a request without usage should cost a known 0")
				}
			}},
		{"hostile sizes", observe.Entry{Start: start, Model: strings.Repeat("é", 500), Metadata: big},
			func(t *testing.T, r *Record) {
				if len(r.Model) > MaxField || !strings.HasPrefix(r.Model, "é") || len(r.Model)%2 != 0 {
					t.Errorf("model kept %d bytes, cut mid-character or unbounded", len(r.Model))
				}
				if len(r.Metadata) != MaxMetadataPairs {
					t.Errorf("kept %d metadata pairs, want %d", len(r.Metadata), MaxMetadataPairs)
				}
				for k, v := range r.Metadata {
					if len(k) > MaxMetadataKey || len(v) > MaxMetadataValue {
						t.Fatalf("metadata pair %d/%d bytes", len(k), len(v))
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Record
			r.FromEntry(&tc.e, start.Add(2*time.Second))
			tc.check(t, &r)
		})
	}
}

func TestLedgerWritesToDatabase(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			l := New(db, Config{Batch: 7})
			for i := 0; i < 50; i++ {
				l.Record(&observe.Entry{Workspace: "w", Start: time.Now(), Usage: &providers.Usage{PromptTokens: 1}, CostUSD: 0.01, CostKnown: true})
			}
			if err := l.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			_, all, err := db.Series(context.Background(), &Filter{Workspace: "w"}, time.Hour)
			if err != nil || all.Requests != 50 || all.CostNanoUSD != 50*10_000_000 {
				t.Fatalf("totals %+v err %v; want 50 requests costing $0.50", all, err)
			}
		})
	}
}

func TestOnlyCallersRequestsAreRecorded(t *testing.T) {
	st := &blockingStore{release: make(chan struct{})}
	close(st.release)
	l := New(st, Config{})
	for _, e := range []observe.Entry{
		{Start: time.Now(), Status: 401},                          // unauthenticated: no workspace
		{Start: time.Now(), Workspace: "w", Operation: "control"}, // the gateway's own APIs
		{Start: time.Now(), Workspace: "w", Operation: providers.OpChat},
	} {
		l.Record(&e)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if st.got != 1 {
		t.Errorf("recorded %d entries, want only the caller's chat request", st.got)
	}
}
