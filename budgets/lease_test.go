package budgets

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// steppedClock is a hand-stepped clock for enforcers and memory limiters.
type steppedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppedClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *steppedClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestUnsettledReservationExpires: an instance reserves the whole $0.10
// budget for requests and dies before settling them; the budget refuses
// until the lease runs out, then another instance gets all of it back
// (its report and its next admission reclaim the dead reservations), and
// the budget is exactly what the live requests used.
func TestUnsettledReservationExpires(t *testing.T) {
	clock := &steppedClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	lim := policies.NewMemoryLimiter(policies.WithClock(clock.Now))
	u := costLimit(t, 0.10, nil)
	dead := NewEnforcer(lim, fixedSource{u}, nil, clock.Now)
	live := NewEnforcer(lim, fixedSource{u}, nil, clock.Now)
	for _, e := range []*Enforcer{dead, live} {
		e.MaxWait, e.Lease = 0, time.Minute
	}
	ctx := context.Background()
	for range 5 { // five streams in flight on the instance that dies
		if _, refusal, err := dead.Admit(ctx, attrs("k"), Reserve{NanoUSD: 20_000_000}); refusal != nil || err != nil {
			t.Fatalf("admit: %v %v", refusal, err)
		}
	}
	if _, refusal, _ := live.Admit(ctx, attrs("k"), Reserve{NanoUSD: 20_000_000}); refusal == nil {
		t.Fatal("admitted on a budget held whole by requests in flight")
	}
	clock.Advance(59 * time.Second)
	if _, refusal, _ := live.Admit(ctx, attrs("k"), Reserve{NanoUSD: 20_000_000}); refusal == nil {
		t.Fatal("reservations given back before their lease ran out")
	}
	clock.Advance(time.Second)
	st, err := live.Statuses(ctx, attrs("k"))
	if err != nil || len(st) != 1 || st[0].Used != 0 {
		t.Fatalf("status after the lease: %+v %v", st, err)
	}
	admitted := 0
	for {
		adm, refusal, err := live.Admit(ctx, attrs("k"), Reserve{NanoUSD: 20_000_000})
		if err != nil {
			t.Fatal(err)
		}
		if refusal != nil {
			break
		}
		admitted++
		if err := adm.Settle(ctx, costing(0.02)); err != nil {
			t.Fatal(err)
		}
	}
	spent, _ := live.Spent(ctx, u, adm0Key(t, live, u), u.PeriodAt(clock.Now()))
	if admitted != 5 || spent != 100_000_000 {
		t.Fatalf("after the lease: %d admitted, spent %d n$; want 5 and 100000000", admitted, spent)
	}
}

// TestSettlementRacesExpiry: requests settled while other instances
// reclaim expired reservations on the same budget are charged exactly
// once: before the lease (settled against the reservation), at the
// instant it runs out (given back by whichever call comes first, charged
// in full by the settlement), and after it (charged in full, once). On
// Redis the instances share one counter and the clock is Redis's.
func TestSettlementRacesExpiry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lim   func(t *testing.T, clock *steppedClock) policies.Limiter
		clock bool
	}{
		{"memory", func(t *testing.T, c *steppedClock) policies.Limiter {
			return policies.NewMemoryLimiter(policies.WithClock(c.Now))
		}, true},
		{"redis", func(t *testing.T, _ *steppedClock) policies.Limiter {
			c := redistest.Client(t, 0)
			return policies.NewRedisLimiter(c, policies.WithKeyPrefix("llm:test-budget:"+t.Name()+time.Now().Format(time.RFC3339Nano)+":"))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &steppedClock{t: time.Now()}
			now := time.Now
			if tc.clock {
				now = clock.Now
			}
			lim := tc.lim(t, clock)
			u := costLimit(t, 100, nil)
			const lease = 50 * time.Millisecond
			var inst [3]*Enforcer
			for i := range inst {
				inst[i] = NewEnforcer(lim, fixedSource{u}, nil, now)
				inst[i].Lease = lease
			}
			ctx := context.Background()
			const n = 60
			adms := make([]*Admission, n)
			for i := range adms {
				adm, refusal, err := inst[i%3].Admit(ctx, attrs("k"), Reserve{NanoUSD: 30_000_000})
				if err != nil || refusal != nil {
					t.Fatalf("admit: %v %v", err, refusal)
				}
				adms[i] = adm
			}
			// A third settle before the lease runs out, a third around the
			// moment it does, a third after; reports reclaim meanwhile.
			var wg sync.WaitGroup
			for i, adm := range adms {
				wg.Add(2)
				go func() {
					defer wg.Done()
					if err := adm.Settle(ctx, costing(0.01)); err != nil {
						t.Error(err)
					}
				}()
				go func() {
					defer wg.Done()
					if _, err := inst[(i+1)%3].Statuses(ctx, attrs("k")); err != nil {
						t.Error(err)
					}
				}()
				if i%(n/3) == n/3-1 {
					wg.Wait()
					if tc.clock {
						clock.Advance(lease / 2)
					} else {
						time.Sleep(lease / 2)
					}
				}
			}
			wg.Wait()
			spent, err := inst[0].Spent(ctx, u, adm0Key(t, inst[0], u), u.PeriodAt(now()))
			if err != nil {
				t.Fatal(err)
			}
			if spent != n*10_000_000 {
				t.Fatalf("spent %d n$, want %d (each request's $0.01 once)", spent, n*10_000_000)
			}
		})
	}
}

// plainLimiter hides a limiter's leases, as a Limiter from outside
// package policies has none.
type plainLimiter struct{ policies.Limiter }

// TestUnleasedLimiter: with a limiter without leases the enforcer still
// reserves (the remainder when little is left), settles exactly and
// refunds what a refused admission had reserved.
func TestUnleasedLimiter(t *testing.T) {
	u := costLimit(t, 0.05, nil)
	e := NewEnforcer(plainLimiter{policies.NewMemoryLimiter()}, fixedSource{u}, nil, nil)
	e.MaxWait = 0
	ctx := context.Background()
	var adms []*Admission
	for range 3 {
		adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 20_000_000})
		if err != nil || refusal != nil {
			t.Fatalf("admit: %v %v", refusal, err)
		}
		adms = append(adms, adm)
	}
	if got := adms[2].Grants[0].Reserved; got != 10_000_000 {
		t.Fatalf("third reservation %d, want the 10000000 left", got)
	}
	if _, refusal, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 1}); refusal == nil {
		t.Fatal("admitted on a fully reserved budget")
	}
	for _, adm := range adms {
		if err := adm.Settle(ctx, costing(0.01)); err != nil {
			t.Fatal(err)
		}
	}
	if spent, _ := e.Spent(ctx, u, adm0Key(t, e, u), u.PeriodAt(time.Now())); spent != 30_000_000 {
		t.Fatalf("spent %d n$, want 30000000", spent)
	}
}
