package policies

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestRaiseToFloor: Raise brings a key's count up to a floor and never
// down, counts reservations in what the key holds but gives back expired
// ones first, and many concurrent raises to one floor count it once.
func TestRaiseToFloor(t *testing.T) {
	const (
		limit  = int64(1_000_000)
		window = 24 * time.Hour
		ttl    = 10 * time.Second
	)
	for _, k := range limiterKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			l := k.make(t, clock)
			r := l.(Raiser)
			steps := []struct {
				name        string
				floor, want int64
			}{
				{"empty key raised", 500, 500},
				{"lower floor: unchanged", 300, 500},
				{"zero floor: unchanged", 0, 500},
				{"higher floor: the difference", 800, 800},
			}
			for _, s := range steps {
				if got, err := r.Raise(ctx, "k", limit, window, s.floor); err != nil || got != s.want {
					t.Fatalf("%s: %d %v, want %d", s.name, got, err, s.want)
				}
			}
			if got := count(t, l, "k", limit, window); got != 800 {
				t.Fatalf("count %d after the raises, want 800", got)
			}
			// A reservation counts; once its lease ran out it does not.
			ll := l.(LeaseLimiter)
			if res, err := ll.Reserve(ctx, "k", limit, window, 400, "a", ttl); err != nil || res.Reserved != 400 {
				t.Fatalf("reserve: %+v %v", res, err)
			}
			if got, _ := r.Raise(ctx, "k", limit, window, 1_000); got != 1_200 {
				t.Fatalf("raise with 400 reserved: %d, want 1200 (unchanged)", got)
			}
			clock.Advance(ttl)
			if got, _ := r.Raise(ctx, "k", limit, window, 1_000); got != 1_000 {
				t.Fatalf("raise after the lease ran out: %d, want 1000 (800 + 200)", got)
			}
			// Concurrent raises of a fresh key to one floor: counted once.
			var wg sync.WaitGroup
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := r.Raise(ctx, "fresh", limit, window, 7_000); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if got := count(t, l, "fresh", limit, window); got != 7_000 {
				t.Errorf("20 concurrent raises to 7000 counted %d", got)
			}
			if got, err := r.Raise(ctx, "missing", limit, window, 0); err != nil || got != 0 {
				t.Errorf("a zero raise of a missing key: %d %v", got, err)
			}
		})
	}
}
