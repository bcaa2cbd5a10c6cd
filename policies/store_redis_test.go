package policies

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestRedisStoreChangeReachesIdleInstance plays two instances on one Redis:
// B loaded its set before A created a policy. Once B's set is older than
// the TTL (no change notice: B does not Watch), every request of a burst on
// B sees the new policy; the old cache served the previous set to all but
// the one request that reloaded it.
func TestRedisStoreChangeReachesIdleInstance(t *testing.T) {
	ctx := context.Background()
	clockA, clockB := newFakeClock(), newFakeClock()
	c := newRedisClient(t)
	ns := testPrefix(t, c) + "policies"
	a := NewRedisStore(c, StoreConfig{Namespace: ns, Now: clockA.Now})
	b := NewRedisStore(newRedisClient(t), StoreConfig{Namespace: ns, Now: clockB.Now})

	tests := []struct {
		name  string
		write func(p *Policy) error
		want  int // active policies B must see afterwards
	}{
		{"create", func(p *Policy) error { return a.Create(ctx, p) }, 1},
		{"archive", func(p *Policy) error {
			p.Status = StatusArchived
			return a.Put(ctx, p)
		}, 0},
	}
	p := newBody("ws")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Active(ctx); err != nil { // B's set is loaded and fresh
				t.Fatal(err)
			}
			if err := tc.write(p); err != nil {
				t.Fatal(err)
			}
			clockB.Advance(1100 * time.Millisecond) // B idle for more than its 1s TTL
			var wg sync.WaitGroup
			var mu sync.Mutex
			stale := 0
			for range 100 {
				wg.Go(func() {
					act, err := b.Active(ctx)
					if err != nil {
						t.Error(err)
					}
					if len(act) != tc.want {
						mu.Lock()
						stale++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if stale != 0 {
				t.Fatalf("%d of 100 concurrent requests on B were served the set from before A's %s", stale, tc.name)
			}
		})
	}
}

// TestRedisStoreVersionCheckIsCheap: an unchanged store renews B's set with
// the version field alone, and a write with the same record count (a
// lowered value) is still seen, because the version moved.
func TestRedisStoreVersionCheck(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	c := newRedisClient(t)
	ns := testPrefix(t, c) + "policies"
	a := NewRedisStore(c, StoreConfig{Namespace: ns, Now: clock.Now})
	b := NewRedisStore(c, StoreConfig{Namespace: ns, Now: clock.Now})
	p := newBody("ws")
	p.Value = 100
	if err := a.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	first, err := b.Active(ctx)
	if err != nil || len(first) != 1 {
		t.Fatalf("Active: %v, %v", first, err)
	}
	clock.Advance(2 * time.Second)
	again, _ := b.Active(ctx)
	if &again[0] != &first[0] {
		t.Fatal("an unchanged store was reloaded instead of renewed by its version")
	}
	p.Value = 10
	if err := a.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	got, _ := b.Active(ctx)
	if len(got) != 1 || got[0].Value != 10 {
		t.Fatalf("after lowering to 10 on A, B enforces %+v", got)
	}
	// The version field is never listed as a policy.
	if all, err := b.List(ctx, ""); err != nil || len(all) != 1 {
		t.Fatalf("List: %d records, %v", len(all), err)
	}
}

// TestRedisStoreWatch: with Watch running, B drops its fresh set as soon as
// A's notice arrives, without waiting for the TTL.
func TestRedisStoreWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := newFakeClock() // never advanced: only the notice can refresh B
	c := newRedisClient(t)
	ns := testPrefix(t, c) + "policies"
	a := NewRedisStore(c, StoreConfig{Namespace: ns, Now: clock.Now})
	b := NewRedisStore(newRedisClient(t), StoreConfig{Namespace: ns, Now: clock.Now})
	notices := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Watch(ctx, func() { notices <- struct{}{} })
	}()
	// Wait until the subscription is live: publish until a notice arrives.
	for ready := false; !ready; {
		c.Publish(ctx, ns+":changed", "0")
		select {
		case <-notices:
			ready = true
		case <-time.After(50 * time.Millisecond):
		}
	}
	if act, _ := b.Active(ctx); len(act) != 0 {
		t.Fatalf("B starts with %d policies", len(act))
	}
	if err := a.Create(ctx, newBody("ws")); err != nil {
		t.Fatal(err)
	}
	<-notices
	if act, _ := b.Active(ctx); len(act) != 1 {
		t.Fatalf("after A's notice B enforces %d policies, want 1", len(act))
	}
	cancel()
	<-done
}
