package logthrottle

import (
	"sync"
	"testing"
	"time"
)

func TestAllow(t *testing.T) {
	var th Throttle
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		at         time.Duration
		ok         bool
		suppressed int64
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{5 * time.Second, false, 0},
		{10 * time.Second, true, 2},
		{11 * time.Second, false, 0},
		{25 * time.Second, true, 1},
	}
	for i, s := range steps {
		ok, n := th.Allow(t0.Add(s.at), 10*time.Second)
		if ok != s.ok || n != s.suppressed {
			t.Fatalf("step %d (+%s): Allow = %v, %d; want %v, %d", i, s.at, ok, n, s.ok, s.suppressed)
		}
	}
	th.Reset()
	if ok, n := th.Allow(t0.Add(26*time.Second), 10*time.Second); !ok || n != 0 {
		t.Fatalf("after Reset: %v %d", ok, n)
	}
}

// TestAllowConcurrent: of many events at one instant exactly one passes.
func TestAllowConcurrent(t *testing.T) {
	var th Throttle
	now := time.Unix(1_700_000_000, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := th.Allow(now, time.Minute); ok {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if passed != 1 {
		t.Fatalf("%d of 64 concurrent events passed, want 1", passed)
	}
}
