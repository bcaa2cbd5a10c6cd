package guardrails

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestAsyncPoolBounds: runs beyond the workers and the queue (by count or
// by bytes) are dropped and counted; the goroutines stay the workers'
// whatever is submitted; Stop cancels running runs, drops waiting ones
// and refuses new ones.
func TestAsyncPoolBounds(t *testing.T) {
	full := asyncDropped.WithLabelValues(DropQueueFull)
	stopped := asyncDropped.WithLabelValues(DropStopped)
	fullBefore, stoppedBefore := counterValue(full), counterValue(stopped)
	baseGoroutines := runtime.NumGoroutine()

	const workers, queue = 4, 8
	p := NewAsyncPool(workers, queue, 1000, nil)
	release := make(chan struct{})
	var started, cancelled atomic.Int64
	block := func(ctx context.Context) {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			cancelled.Add(1)
		}
	}
	accepted := 0
	for range 1000 {
		if p.Submit(10, block) {
			accepted++
		}
	}
	// The workers may not all have taken their first job yet, so between
	// queue and workers+queue runs were accepted.
	if accepted < queue || accepted > workers+queue {
		t.Fatalf("accepted %d runs, want between %d and %d", accepted, queue, workers+queue)
	}
	if got := counterValue(full) - fullBefore; int(got) != 1000-accepted {
		t.Fatalf("queue_full drops grew by %v, want %d", got, 1000-accepted)
	}
	if n := runtime.NumGoroutine() - baseGoroutines; n > workers+2 {
		t.Fatalf("%d goroutines after 1000 submissions, want about %d", n, workers)
	}

	for started.Load() < workers {
		time.Sleep(time.Millisecond)
	}
	p.Stop()
	if got := cancelled.Load(); got != workers {
		t.Fatalf("%d running runs saw their context cancelled, want %d", got, workers)
	}
	if p.Submit(1, block) {
		t.Fatal("a stopped pool accepted a run")
	}
	// Waiting runs were dropped (never started), and the late one too.
	if got := int(counterValue(stopped) - stoppedBefore); got != accepted-workers+1 {
		t.Fatalf("stopped drops grew by %d, want %d", got, accepted-workers+1)
	}
	if started.Load() != workers {
		t.Fatalf("%d runs started, want only the %d running at Stop", started.Load(), workers)
	}
	if p.QueuedBytes() != 0 {
		t.Fatalf("queued bytes %d after Stop", p.QueuedBytes())
	}
	var nilPool *AsyncPool
	if nilPool.Submit(1, block) {
		t.Fatal("a nil pool accepted a run")
	}

	// The byte bound: a run that would take the waiting runs past it is
	// refused though the queue has room by count.
	p = NewAsyncPool(1, 100, 100, nil)
	defer p.Stop()
	release2 := make(chan struct{})
	defer close(release2)
	var first atomic.Bool
	p.Submit(1, func(context.Context) { first.Store(true); <-release2 })
	for !first.Load() {
		time.Sleep(time.Millisecond)
	}
	noop := func(context.Context) {}
	if !p.Submit(60, noop) || p.Submit(60, noop) || !p.Submit(40, noop) {
		t.Fatalf("byte bound: queued %d bytes; want 60 accepted, 60 more refused, 40 accepted", p.QueuedBytes())
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
