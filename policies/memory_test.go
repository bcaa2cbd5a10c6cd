package policies

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// admitConcurrently runs n goroutines that each try to admit one unit of
// key at the same moment and returns how many were admitted.
func admitConcurrently(t *testing.T, limiters []Limiter, n int, key string, limit int64) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		l := limiters[i%len(limiters)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := l.Admit(context.Background(), key, limit, time.Minute, 1)
			if err != nil {
				errs <- err
				return
			}
			if d.Allowed {
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return admitted.Load()
}

func TestMemoryConcurrentAdmitsExactlyLimit(t *testing.T) {
	m := NewMemoryLimiter()
	for round := 0; round < 5; round++ {
		key := "k" + strconv.Itoa(round)
		if got := admitConcurrently(t, []Limiter{m}, 200, key, 50); got != 50 {
			t.Fatalf("round %d: admitted %d of 200, want exactly 50", round, got)
		}
	}
}

func TestMemoryConcurrentManyKeys(t *testing.T) {
	// Different keys on all shards at once, under -race.
	m := NewMemoryLimiter(WithSweepEvery(7))
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				key := "key-" + strconv.Itoa(i%100)
				d, err := m.Admit(context.Background(), key, 10, time.Minute, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
				if i%10 == 0 {
					_ = m.Adjust(context.Background(), key, 10, time.Minute, -1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() < 1000 {
		t.Fatalf("admitted %d, want at least 100 keys x 10", admitted.Load())
	}
}

func TestMemoryEvictsIdleKeys(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryLimiter(WithClock(clock.Now), WithSweepEvery(1))
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		if _, err := m.Admit(ctx, "user-"+strconv.Itoa(i), 5, time.Minute, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Len(); n != 1000 {
		t.Fatalf("Len = %d, want 1000", n)
	}
	// Not yet decayed: a sweep keeps them.
	clock.Advance(30 * time.Second)
	m.Sweep()
	if n := m.Len(); n != 1000 {
		t.Fatalf("after 30s Len = %d, want 1000", n)
	}
	// Fully decayed: one unit spent at 0 leaves the window at 61s.
	clock.Advance(31 * time.Second)
	m.Sweep()
	if n := m.Len(); n != 0 {
		t.Fatalf("after 61s Len = %d, want 0", n)
	}
}

func TestMemoryOpportunisticSweep(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryLimiter(WithClock(clock.Now), WithSweepEvery(1))
	ctx := context.Background()
	for i := 0; i < 3000; i++ {
		_, _ = m.Admit(ctx, "old-"+strconv.Itoa(i), 5, time.Minute, 1)
	}
	clock.Advance(2 * time.Minute)
	// Traffic on other keys sweeps one shard per call, round robin, so
	// memShards calls reach every shard.
	for i := 0; i < 2*memShards; i++ {
		_, _ = m.Admit(ctx, "hot", 1000000, time.Minute, 1)
	}
	if n := m.Len(); n != 1 {
		t.Fatalf("Len = %d, want only the hot key", n)
	}
}

func TestMemoryShardMapShrinksAfterSpike(t *testing.T) {
	s := &memShard{m: make(map[string]*counter)}
	for i := 0; i < 5000; i++ {
		c := s.insert("k" + strconv.Itoa(i))
		c.width, c.window = int64(time.Second), int64(time.Minute)
		c.add(0, 1)
	}
	live := s.insert("live")
	live.width, live.window = int64(time.Second), int64(time.Minute)
	live.add(100, 1)
	old := s.m
	s.sweep(int64(90 * time.Second))
	if len(s.m) != 1 || s.m["live"] != live {
		t.Fatalf("sweep kept %d keys, want only the live one", len(s.m))
	}
	if s.peak != 1 {
		t.Fatalf("peak = %d after the rebuild, want 1", s.peak)
	}
	old["x"] = nil // the map was replaced: writing the old one must not show up
	if _, ok := s.m["x"]; ok {
		t.Fatal("the shard map was not rebuilt")
	}
}

func TestMemoryKeyDeletedWhenEmpty(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryLimiter(WithClock(clock.Now))
	ctx := context.Background()
	if _, err := m.Admit(ctx, "k", 10, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Admit(ctx, "k", 10, time.Minute, 11); err != nil {
		t.Fatal(err)
	}
	if n := m.Len(); n != 0 {
		t.Fatalf("probes and refusals stored %d keys", n)
	}
	_, _ = m.Admit(ctx, "k", 10, time.Minute, 3)
	if err := m.Adjust(ctx, "k", 10, time.Minute, -3); err != nil {
		t.Fatal(err)
	}
	if n := m.Len(); n != 0 {
		t.Fatalf("a fully refunded key is still held (%d keys)", n)
	}
}

func TestMemoryClockStepsBack(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryLimiter(WithClock(clock.Now))
	ctx := context.Background()
	clock.Set(t0.Add(10 * time.Second))
	_, _ = m.Admit(ctx, "k", 10, time.Minute, 5)
	clock.Set(t0.Add(5 * time.Second))
	d, _ := m.Admit(ctx, "k", 10, time.Minute, 5)
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after the clock stepped back: %+v", d)
	}
	d, _ = m.Admit(ctx, "k", 10, time.Minute, 1)
	if d.Allowed {
		t.Fatalf("over the limit after the clock stepped back: %+v", d)
	}
}

func TestMemoryBucketsOption(t *testing.T) {
	clock := newFakeClock()
	m := NewMemoryLimiter(WithClock(clock.Now), WithBuckets(6))
	ctx := context.Background()
	clock.Set(t0.Add(time.Second))
	_, _ = m.Admit(ctx, "k", 1, time.Minute, 1)
	// 6 buckets of 10s: the unit spent at 1s leaves at 10s+60s.
	d, _ := m.Admit(ctx, "k", 1, time.Minute, 1)
	if d.Allowed || d.RetryAfter != 69*time.Second {
		t.Fatalf("got %+v, want refused with RetryAfter 69s", d)
	}
}

func TestMemoryAllocsOnExistingKey(t *testing.T) {
	m := NewMemoryLimiter()
	ctx := context.Background()
	_, _ = m.Admit(ctx, "k", 1<<40, time.Minute, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		_, _ = m.Admit(ctx, "k", 1<<40, time.Minute, 1)
	})
	if allocs > 0 {
		t.Fatalf("Admit on an existing key allocates %.1f times", allocs)
	}
}
