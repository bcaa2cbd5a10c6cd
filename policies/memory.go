package policies

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// memShards is the number of independently locked parts of a
// MemoryLimiter; a power of two comfortably above typical core counts, so
// requests for different keys rarely wait for each other.
const memShards = 64

// MemoryLimiter is the in-process Limiter, for a single gateway instance or
// as a fallback when Redis is down. Keys are spread over sharded maps, each
// behind its own mutex that is never held across I/O (there is none).
//
// Memory follows the active keys: a key whose units have all left the
// window is deleted when it is next touched, and a sweep removes the idle
// keys nobody touches. The sweep runs inside Admit and Adjust (one shard
// every SweepEvery calls on a shard, round robin), so no goroutine is
// needed and there is nothing to Close; call Sweep from a ticker for
// deterministic clean-up in a quiet process.
type MemoryLimiter struct {
	now        func() time.Time
	base       time.Time
	buckets    int64
	sweepEvery uint64
	sweepNext  atomic.Uint64
	seed       maphash.Seed
	shards     [memShards]memShard
}

type memShard struct {
	mu   sync.Mutex
	m    map[string]*counter
	ops  uint64
	peak int
	_    [32]byte // keep neighbouring shards' locks on separate cache lines
}

// NewMemoryLimiter returns an empty MemoryLimiter. It uses WithClock,
// WithBuckets and WithSweepEvery.
func NewMemoryLimiter(opts ...LimiterOption) *MemoryLimiter {
	cfg := newLimiterConfig(opts)
	m := &MemoryLimiter{now: cfg.now, buckets: cfg.buckets, sweepEvery: cfg.sweepEvery, seed: maphash.MakeSeed()}
	// Times are kept as nanoseconds since base; with the real clock the
	// difference uses the monotonic reading, so wall-clock jumps cannot
	// move a window.
	m.base = m.now()
	for i := range m.shards {
		m.shards[i].m = make(map[string]*counter)
	}
	return m
}

var _ Limiter = (*MemoryLimiter)(nil)

func (m *MemoryLimiter) shard(key string) *memShard {
	return &m.shards[maphash.String(m.seed, key)%memShards]
}

func (m *MemoryLimiter) tick() int64 { return int64(m.now().Sub(m.base)) }

// Admit implements Limiter.
func (m *MemoryLimiter) Admit(_ context.Context, key string, limit int64, window time.Duration, cost int64) (Decision, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return Decision{}, err
	}
	if cost < 0 {
		return Decision{}, errNegativeCost
	}
	var d Decision
	// Without a counter, a zero cost or one above the limit would store
	// nothing: answered without creating state.
	if !m.update(key, window, cost > 0 && cost <= limit, func(c *counter, t int64) { d = c.admit(t, limit, cost) }) {
		return emptyDecision(limit, int64(window), cost), nil
	}
	return d, nil
}

// Adjust implements Limiter.
func (m *MemoryLimiter) Adjust(_ context.Context, key string, limit int64, window time.Duration, delta int64) error {
	if err := checkArgs(key, limit, window); err != nil {
		return err
	}
	if delta == 0 {
		return nil
	}
	// A refund on a counter that is gone has nothing left to give back.
	m.update(key, window, delta > 0, func(c *counter, t int64) {
		if delta > 0 {
			c.add(floorDiv(t, c.width), delta)
		} else {
			c.refund(-delta)
		}
	})
	return nil
}

// update runs op on key's counter, prepared for the current tick, under
// its shard's lock, creating the counter when it is missing and create
// is set (else op does not run and update reports false). A counter op
// leaves empty is dropped. Every operation of the limiter goes through
// it, so each keeps the shard's sweep count.
func (m *MemoryLimiter) update(key string, window time.Duration, create bool, op func(c *counter, t int64)) bool {
	t, w := m.tick(), int64(window)
	s := m.shard(key)
	s.mu.Lock()
	c := s.m[key]
	if c == nil {
		if !create {
			s.mu.Unlock()
			return false
		}
		c = s.insert(key)
	}
	c.prepare(t, w, bucketWidth(w, m.buckets))
	op(c, t)
	if c.total <= 0 {
		delete(s.m, key)
	}
	sweep := s.count(m.sweepEvery)
	s.mu.Unlock()
	if sweep {
		m.sweepOne()
	}
	return true
}

// Len returns the number of keys held, for metrics and tests.
func (m *MemoryLimiter) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Sweep removes every key whose units have all left its window.
func (m *MemoryLimiter) Sweep() {
	t := m.tick()
	for i := range m.shards {
		m.shards[i].sweep(t)
	}
}

func (m *MemoryLimiter) sweepOne() {
	i := m.sweepNext.Add(1) % memShards
	m.shards[i].sweep(m.tick())
}

// insert adds an empty counter for key. Called with s.mu held.
func (s *memShard) insert(key string) *counter {
	c := &counter{}
	s.m[key] = c
	if n := len(s.m); n > s.peak {
		s.peak = n
	}
	return c
}

// count records one call on the shard and reports whether it is time to
// sweep. Called with s.mu held.
func (s *memShard) count(every uint64) bool {
	s.ops++
	return s.ops%every == 0
}

func (s *memShard) sweep(t int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.m {
		if c.idle(t) {
			delete(s.m, k)
		}
	}
	// Go maps never shrink; rebuild one that emptied out after a spike so
	// memory follows the active keys rather than their high-water mark.
	if s.peak > 1024 && len(s.m) < s.peak/4 {
		nm := make(map[string]*counter, len(s.m))
		for k, c := range s.m {
			nm[k] = c
		}
		s.m = nm
		s.peak = len(nm)
	}
}

// emptyDecision answers for a key with no units in its window.
func emptyDecision(limit, window, cost int64) Decision {
	if cost > limit {
		return Decision{Limit: limit, Remaining: limit, RetryAfter: time.Duration(window)}
	}
	return Decision{Allowed: true, Limit: limit, Remaining: limit - cost}
}

// bucket holds the units spent in [idx·width, (idx+1)·width).
type bucket struct{ idx, n int64 }

// counter is one key's sliding window: its live buckets, oldest first, in
// b[off:]. All times are nanoseconds since the limiter's base.
type counter struct {
	b      []bucket
	off    int
	total  int64
	width  int64
	window int64
	// leases are the reservations held under an id (lease.go); nil for
	// the rate limiter's keys, which never hold any.
	leases *leaseSet
}

// prepare brings the counter to time t for window w and bucket width g:
// re-buckets units counted with another width, then drops the buckets
// whose end is at or before t−w.
func (c *counter) prepare(t, w, g int64) {
	if c.width != 0 && c.width != g && c.off < len(c.b) {
		c.rebucket(t, w, g)
	}
	c.width, c.window = g, w
	first := floorDiv(t-w, g)
	for c.off < len(c.b) && c.b[c.off].idx < first {
		c.total -= c.b[c.off].n
		c.off++
	}
	if c.off == len(c.b) {
		c.b, c.off, c.total = c.b[:0], 0, 0
	}
}

// rebucket moves every live unit to the bucket of width g that holds the
// latest instant it may have been spent (the end of its old bucket). Units
// therefore only move later, which keeps the count one-sided.
func (c *counter) rebucket(t, w, g int64) {
	cur := floorDiv(t, g)
	out := c.b[:0]
	var total int64
	for _, b := range c.b[c.off:] {
		end := (b.idx + 1) * c.width
		if end <= t-w {
			continue
		}
		idx := min(floorDiv(end-1, g), cur)
		if l := len(out); l > 0 && out[l-1].idx >= idx {
			out[l-1].n = satAdd(out[l-1].n, b.n)
		} else {
			out = append(out, bucket{idx, b.n})
		}
		total = satAdd(total, b.n)
	}
	c.b, c.off, c.total = out, 0, total
}

// add counts n units in bucket idx. A clock that stepped back makes idx
// older than the newest bucket; the units then join the newest bucket,
// which only delays their expiry.
func (c *counter) add(idx, n int64) {
	if l := len(c.b); l > c.off && c.b[l-1].idx >= idx {
		c.b[l-1].n = satAdd(c.b[l-1].n, n)
	} else {
		if len(c.b) == cap(c.b) && c.off > 0 {
			k := copy(c.b, c.b[c.off:])
			c.b, c.off = c.b[:k], 0
		}
		c.b = append(c.b, bucket{idx, n})
	}
	c.total = satAdd(c.total, n)
}

// refund cancels n units, oldest first, never below zero.
func (c *counter) refund(n int64) {
	for n > 0 && c.off < len(c.b) {
		b := &c.b[c.off]
		if b.n > n {
			b.n -= n
			c.total -= n
			return
		}
		n -= b.n
		c.total -= b.n
		c.off++
	}
	if c.off == len(c.b) {
		c.b, c.off, c.total = c.b[:0], 0, 0
	}
}

// expiry is when bucket b leaves the window.
func (c *counter) expiry(b bucket) int64 { return (b.idx+1)*c.width + c.window }

// idle reports whether every unit has left the window at time t.
func (c *counter) idle(t int64) bool {
	return c.total <= 0 || c.off >= len(c.b) || c.expiry(c.b[len(c.b)-1]) <= t
}

// admit decides on cost at time t and consumes it if allowed. The counter
// must have been prepared for t.
func (c *counter) admit(t, limit, cost int64) Decision {
	d := Decision{Limit: limit}
	switch {
	case cost > limit:
		d.RetryAfter = time.Duration(c.window)
	case c.total <= limit-cost && (cost > 0 || c.total < limit):
		d.Allowed = true
		if cost > 0 {
			c.add(floorDiv(t, c.width), cost)
		}
	default:
		need := c.total - limit + max(cost, 1)
		var freed int64
		for _, b := range c.b[c.off:] {
			freed += b.n
			if freed >= need {
				d.RetryAfter = time.Duration(c.expiry(b) - t)
				break
			}
		}
	}
	d.Remaining = max(0, limit-c.total)
	if c.total > 0 {
		d.ResetAfter = time.Duration(c.expiry(c.b[len(c.b)-1]) - t)
	}
	return d
}
