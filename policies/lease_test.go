package policies

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// count is what key holds: the limit less what a zero-cost Admit says
// remains.
func count(t *testing.T, l Limiter, key string, limit int64, window time.Duration) int64 {
	t.Helper()
	d, err := l.Admit(context.Background(), key, limit, window, 0)
	if err != nil {
		t.Fatal(err)
	}
	return limit - d.Remaining
}

// TestLeaseExpiry: a reservation never settled is given back by the next
// call on its key once its lease has run out, and not before; one settled
// in time is charged exactly; one settled after expiry gave it back is
// charged what was used, in full, once.
func TestLeaseExpiry(t *testing.T) {
	const (
		limit  = int64(1000)
		window = 24 * time.Hour
		ttl    = 10 * time.Second
	)
	for _, k := range limiterKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			l := k.make(t, clock).(LeaseLimiter)
			r, err := l.Reserve(ctx, "k", limit, window, 400, "a", ttl)
			if err != nil || !r.Allowed || r.Reserved != 400 || r.Held != 400 {
				t.Fatalf("reserve a: %+v %v", r, err)
			}
			r, _ = l.Reserve(ctx, "k", limit, window, 300, "b", ttl)
			clock.Advance(ttl / 2)
			r, _ = l.Reserve(ctx, "k", limit, window, 500, "c", ttl)
			// Only 300 remain: the remainder is reserved.
			if !r.Allowed || r.Reserved != 300 || r.Held != 1000 || r.Remaining != 0 {
				t.Fatalf("partial reserve c: %+v", r)
			}
			if r, _ = l.Reserve(ctx, "k", limit, window, 10, "d", ttl); r.Allowed || r.Held != 1000 || r.Reclaimed != 0 {
				t.Fatalf("full budget before any lease ran out: %+v", r)
			}
			// b settles in time: 300 reserved, 120 used.
			if live, err := l.Settle(ctx, "k", limit, window, "b", 300, 120, true); err != nil || !live {
				t.Fatalf("settle b: %v %v", live, err)
			}
			if got := count(t, l, "k", limit, window); got != 400+120+300 {
				t.Fatalf("count after b = %d", got)
			}
			// a's lease runs out (its instance died): the next reservation
			// takes its 400 back first.
			clock.Advance(ttl / 2)
			r, _ = l.Reserve(ctx, "k", limit, window, 50, "e", ttl)
			if !r.Allowed || r.Reclaimed != 400 || r.Held != 300+50 {
				t.Fatalf("reserve after a's lease: %+v", r)
			}
			// c's lease runs out too and is reclaimed by a report; c then
			// settles late with 70 used: charged 70, not refunded again.
			clock.Advance(ttl / 2)
			if r, _ = l.Reserve(ctx, "k", limit, window, 0, "", ttl); r.Reclaimed != 300 || r.Held != 50 {
				t.Fatalf("report after c's lease: %+v", r)
			}
			if live, _ := l.Settle(ctx, "k", limit, window, "c", 300, 70, true); live {
				t.Fatal("c settled as live after its lease was given back")
			}
			if live, _ := l.Settle(ctx, "k", limit, window, "e", 50, 50, true); !live {
				t.Fatal("e not live")
			}
			if got, want := count(t, l, "k", limit, window), int64(120+70+50); got != want {
				t.Fatalf("final count = %d, want %d (used by b, c, e)", got, want)
			}
		})
	}
}

// TestLeaseSettleRacesExpiry: a settlement racing the expiry of its own
// reservation (another instance reclaiming at the same instant) leaves the
// count at exactly what was used, whichever wins, and is not refunded
// twice.
func TestLeaseSettleRacesExpiry(t *testing.T) {
	const (
		limit  = int64(1_000_000)
		window = time.Hour
		ttl    = time.Second
		rounds = 50
	)
	for _, k := range limiterKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			l := k.make(t, clock).(LeaseLimiter)
			var wins [2]int
			for i := range rounds {
				key := "race" + string(rune('a'+i%26)) + string(rune('a'+i/26))
				if r, err := l.Reserve(ctx, key, limit, window, 1000, "x", ttl); err != nil || !r.Allowed {
					t.Fatalf("reserve: %+v %v", r, err)
				}
				// Odd rounds settle a microsecond before the lease runs out
				// (live), even rounds at the instant it does (given back
				// first, by whichever call runs first).
				step := ttl - time.Duration(i%2)*time.Microsecond
				clock.Advance(step)
				var wg sync.WaitGroup
				var live bool
				wg.Add(2)
				go func() { defer wg.Done(); live, _ = l.Settle(ctx, key, limit, window, "x", 1000, 333, true) }()
				go func() { defer wg.Done(); _, _ = l.Reserve(ctx, key, limit, window, 0, "", ttl) }()
				wg.Wait()
				if live {
					wins[0]++
				} else {
					wins[1]++
				}
				if got := count(t, l, key, limit, window); got != 333 {
					t.Fatalf("round %d (live=%v): count %d, want 333", i, live, got)
				}
				clock.Advance(-step)
			}
			if wins[0] == 0 || wins[1] == 0 {
				t.Fatalf("both outcomes expected: %v", wins)
			}
			t.Logf("settled live %d, after reclaim %d", wins[0], wins[1])
		})
	}
}

// TestLeaseKeysStillCount: a rate-limit Admit and Adjust on a key holding
// leases count its reservations and keep them, also when the bucket width
// changes (a re-bucketed hash keeps its leases).
func TestLeaseKeysStillCount(t *testing.T) {
	for _, k := range limiterKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			l := k.make(t, clock).(LeaseLimiter)
			if _, err := l.Reserve(ctx, "k", 100, time.Minute, 60, "a", time.Hour); err != nil {
				t.Fatal(err)
			}
			if d, _ := l.Admit(ctx, "k", 100, time.Minute, 50); d.Allowed {
				t.Fatal("admit ignored the held reservation")
			}
			if err := l.Adjust(ctx, "k", 100, time.Minute, 10); err != nil {
				t.Fatal(err)
			}
			// Another window re-buckets the key; the lease survives it.
			if got := count(t, l, "k", 100, 2*time.Minute); got != 70 {
				t.Fatalf("count after rebucket = %d", got)
			}
			if live, _ := l.Settle(ctx, "k", 100, 2*time.Minute, "a", 60, 5, true); !live {
				t.Fatal("lease lost")
			}
			if got := count(t, l, "k", 100, 2*time.Minute); got != 15 {
				t.Fatalf("count after settle = %d", got)
			}
		})
	}
}

// TestLeaseManyExpire: a burst of reservations that all expire (more than
// the 1,000 a Redis call gives back) is given back by the next calls.
func TestLeaseManyExpire(t *testing.T) {
	const n = 1200
	for _, k := range limiterKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			l := k.make(t, clock).(LeaseLimiter)
			for i := range n {
				if r, err := l.Reserve(ctx, "k", 1e9, time.Hour, 7, "r"+strconv.Itoa(i), time.Second); err != nil || !r.Allowed {
					t.Fatalf("reserve %d: %+v %v", i, r, err)
				}
			}
			clock.Advance(time.Second)
			// Redis gives back at most 1,000 a call; the next takes the rest.
			var back int64
			for calls := 1; ; calls++ {
				r, err := l.Reserve(ctx, "k", 1e9, time.Hour, 0, "", time.Second)
				if err != nil || calls > 2 {
					t.Fatalf("after the leases, call %d: %+v %v", calls, r, err)
				}
				back += r.Reclaimed
				if r.Held == 0 {
					break
				}
			}
			if back != 7*n {
				t.Fatalf("gave back %d, want %d", back, 7*n)
			}
			if got := count(t, l, "k", 1e9, time.Hour); got != 0 {
				t.Fatalf("count %d after every reservation expired", got)
			}
		})
	}
}

// TestLeaseKeysShareSlot: a counter's reservation keys are in its Redis
// Cluster slot (CRC16 as Redis computes it, hash tags included), so one
// script may touch all three on Redis Cluster.
func TestLeaseKeysShareSlot(t *testing.T) {
	for key, want := range map[string]uint16{"foo": 12182, "bar": 5061, "hello": 866, "{foo}.x": 12182, "a{}b": keySlot("a{}b")} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if crc16("123456789") != 0x31c3 {
		t.Errorf("crc16 check value %#x", crc16("123456789"))
	}
	for _, prefix := range []string{"llmgw:rl:", "fleet{a}:llmgw:rl:", "odd{:", "x}{y"} {
		r := &RedisLimiter{prefix: prefix}
		keys := r.leaseKeys("budget|ws|{key}|2026-03")
		for _, k := range keys[1:] {
			if prefix == "llmgw:rl:" && !strings.HasPrefix(k, prefix) {
				t.Errorf("%q does not start with the prefix", k)
			}
			if keySlot(k) != keySlot(keys[0]) {
				t.Errorf("prefix %q: %q in slot %d, counter %q in %d", prefix, k, keySlot(k), keys[0], keySlot(keys[0]))
			}
		}
	}
}

// TestHoldIsWhole: Hold admits the whole cost or refuses, as Admit does,
// where Reserve would take the remainder; what it holds comes back when
// its lease runs out, and Settle charges it like a reservation.
func TestHoldIsWhole(t *testing.T) {
	const (
		limit  = int64(1000)
		window = time.Hour
		ttl    = 10 * time.Second
	)
	for _, k := range limiterKinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newFakeClock()
			l := k.make(t, clock).(Holder)
			if r, err := l.Hold(ctx, "k", limit, window, 700, "a", ttl); err != nil || !r.Allowed || r.Reserved != 700 || r.Held != 700 {
				t.Fatalf("hold a: %+v %v", r, err)
			}
			// 300 remain: a cost of 400 is refused whole, nothing held.
			if r, err := l.Hold(ctx, "k", limit, window, 400, "b", ttl); err != nil || r.Allowed || r.Reserved != 0 || r.Held != 700 {
				t.Fatalf("hold b over the limit: %+v %v", r, err)
			}
			if r, _ := l.Hold(ctx, "k", limit, window, 300, "c", ttl); !r.Allowed || r.Reserved != 300 || r.Remaining != 0 {
				t.Fatalf("hold c, exactly the rest: %+v", r)
			}
			// c settles in time having used 100: 200 refunded.
			if live, err := l.Settle(ctx, "k", limit, window, "c", 300, 100, true); err != nil || !live {
				t.Fatalf("settle c: %v %v", live, err)
			}
			if got := count(t, l, "k", limit, window); got != 800 {
				t.Fatalf("count after c settled = %d, want 800", got)
			}
			// a's instance died: after its lease the next call reclaims it.
			clock.Advance(ttl + time.Second)
			r, err := l.Hold(ctx, "k", limit, window, 850, "d", ttl)
			if err != nil || !r.Allowed || r.Reclaimed != 700 || r.Held != 850 {
				t.Fatalf("hold d after a's lease ran out: %+v %v", r, err)
			}
			if got := count(t, l, "k", limit, window); got != 950 {
				t.Fatalf("count = %d, want c's 100 and d's 850", got)
			}
		})
	}
}
