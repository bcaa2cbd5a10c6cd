package guardrails

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Async hook limits. Async hooks run after their answer was sent, so
// nothing upstream bounds how many wait behind a slow webhook: one
// goroutine per request held every request and answer until its webhook
// answered. The pool bounds the work instead.
const (
	// AsyncWorkers is how many async hook runs execute at once in the
	// process.
	AsyncWorkers = 16
	// AsyncQueue is how many runs may wait for a worker; a run that finds
	// the queue full is dropped (counted and logged).
	AsyncQueue = 256
	// AsyncQueueBytes bounds the request and answer bytes the waiting runs
	// hold; a run that would pass it is dropped, like one that finds the
	// queue full.
	AsyncQueueBytes = 64 << 20
	// asyncLogInterval spaces the warnings about dropped runs.
	asyncLogInterval = 10 * time.Second
)

// Reasons a run is dropped, the values of the metric's "reason" label.
const (
	DropQueueFull = "queue_full"
	DropStopped   = "stopped"
)

// AsyncPool runs async hooks on a fixed number of workers fed by a
// bounded queue. A run that does not fit is dropped: it is counted in
// llm_gateway_async_hooks_dropped_total and a warning (at most one per
// 10 s, with the number dropped since the last one) is logged. The pool
// is process state owned by the llm app: it outlives config reloads and
// is stopped when the last config using it stops.
type AsyncPool struct {
	jobs     chan asyncJob
	workers  int
	maxBytes int64
	queued   atomic.Int64 // bytes held by waiting runs
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.RWMutex // guards stopped against sends on a closed queue
	stopped bool

	logger   atomic.Pointer[zap.Logger]
	logEvery rate.Sometimes
	unlogged atomic.Int64 // drops not yet reported by a warning
}

type asyncJob struct {
	size int64
	run  func(context.Context)
}

// NewAsyncPool starts a pool of workers goroutines with a queue of queue
// runs holding at most maxBytes. Values below 1 take the defaults
// (AsyncWorkers, AsyncQueue, AsyncQueueBytes). Drops are logged to logger
// (nil: not logged; SetLogger changes it).
func NewAsyncPool(workers, queue int, maxBytes int64, logger *zap.Logger) *AsyncPool {
	if workers < 1 {
		workers = AsyncWorkers
	}
	if queue < 1 {
		queue = AsyncQueue
	}
	if maxBytes < 1 {
		maxBytes = AsyncQueueBytes
	}
	p := &AsyncPool{jobs: make(chan asyncJob, queue), workers: workers, maxBytes: maxBytes, logEvery: rate.Sometimes{Interval: asyncLogInterval}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.SetLogger(logger)
	p.wg.Add(workers)
	for range workers {
		go p.work()
	}
	return p
}

// SetLogger sets the logger drops are reported to: the newest config's,
// since the pool outlives the config that created it.
func (p *AsyncPool) SetLogger(l *zap.Logger) {
	if l == nil {
		l = zap.NewNop()
	}
	p.logger.Store(l)
}

// Submit queues run, which holds size bytes of request and answer until
// it is done, and reports whether it was queued. A full queue, a queue
// whose bytes would pass the bound, or a stopped (or nil) pool drops it.
// run gets a context that is cancelled when the pool stops.
func (p *AsyncPool) Submit(size int64, run func(context.Context)) bool {
	if p == nil {
		recordAsyncDrop(DropStopped)
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped {
		p.drop(DropStopped)
		return false
	}
	if p.queued.Add(size) > p.maxBytes {
		p.queued.Add(-size)
		p.drop(DropQueueFull)
		return false
	}
	select {
	case p.jobs <- asyncJob{size: size, run: run}:
		return true
	default:
		p.queued.Add(-size)
		p.drop(DropQueueFull)
		return false
	}
}

// QueuedBytes is what the waiting runs hold (for tests and debugging).
func (p *AsyncPool) QueuedBytes() int64 { return p.queued.Load() }

// Stop stops taking runs, cancels the context of the running ones (their
// outbound calls end), drops those still waiting and returns once every
// worker has exited.
func (p *AsyncPool) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	close(p.jobs)
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

func (p *AsyncPool) work() {
	defer p.wg.Done()
	for j := range p.jobs {
		p.queued.Add(-j.size)
		if p.ctx.Err() != nil {
			p.drop(DropStopped)
			continue
		}
		p.runOne(j)
	}
}

// runOne runs a job; a panicking check must not take a worker with it
// (runCheck recovers checks, this covers the rest of the run).
func (p *AsyncPool) runOne(j asyncJob) {
	defer func() {
		if r := recover(); r != nil {
			p.logger.Load().Error("llm async hooks: run panicked", zap.Any("panic", r))
		}
	}()
	j.run(p.ctx)
}

// drop counts a dropped run and logs, at most once per interval, how many
// were dropped since the last warning. Nothing of the request is logged.
func (p *AsyncPool) drop(reason string) {
	recordAsyncDrop(reason)
	p.unlogged.Add(1)
	p.logEvery.Do(func() {
		n := p.unlogged.Swap(0)
		p.logger.Load().Warn("llm async hooks dropped: the async hook pool is full or stopped",
			zap.String("reason", reason), zap.Int64("dropped", n),
			zap.Int("workers", p.workers), zap.Int("queue", cap(p.jobs)), zap.Int64("queue_bytes", p.maxBytes))
	})
}
