package budgets

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

// TestUsedShowsOvershoot: a request that cost more than what was left
// (it reserved the remainder, then its answer ran long) takes the spend
// past the limit; the usage report says so (used 0.003 of 0.001,
// remaining 0) instead of capping used at the limit.
func TestUsedShowsOvershoot(t *testing.T) {
	ctx := context.Background()
	u := costLimit(t, 0.001, nil)
	e := NewEnforcer(policies.NewMemoryLimiter(), fixedSource{u}, nil, nil)
	adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 500_000})
	if err != nil || refusal != nil {
		t.Fatalf("admit: %v %v", err, refusal)
	}
	if err := adm.Settle(ctx, costing(0.003)); err != nil {
		t.Fatal(err)
	}
	st, err := e.Statuses(ctx, attrs("k"))
	if err != nil || len(st) != 1 {
		t.Fatalf("statuses %+v (%v)", st, err)
	}
	if st[0].Used != 0.003 || st[0].Remaining != 0 {
		t.Fatalf("used %v remaining %v, want 0.003 and 0", st[0].Used, st[0].Remaining)
	}
}

// failingKV is a KV that cannot be reached.
type failingKV struct{ kvstore.KV }

var errUnreachable = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

func (failingKV) List(context.Context, string, bool) ([]string, error) { return nil, errUnreachable }
func (failingKV) Load(context.Context, string) ([]byte, error)         { return nil, errUnreachable }

// TestUnreachableStoreKnowsNoLimit: a store that cannot be read and never
// was knows no limit, and says so without an error, so requests need no
// store; once a set was read, a failed read keeps serving it.
func TestUnreachableStoreKnowsNoLimit(t *testing.T) {
	ctx := context.Background()
	var told atomic.Int32
	s := NewStore(failingKV{}, nil)
	s.OnUnknown = func(error) { told.Add(1) }
	e := NewEnforcer(policies.NewMemoryLimiter(), s, nil, nil)
	if e.Enabled(ctx) {
		t.Fatal("an unreachable store enables usage limits")
	}
	if adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 1}); adm != nil || refusal != nil || err != nil {
		t.Fatalf("admit: %v %v %v, want no limit and no error", adm, refusal, err)
	}
	if told.Load() != 1 {
		t.Errorf("told %d times, want once (the next read is refreshEvery later)", told.Load())
	}

	clock := time.Now()
	now := func() time.Time { return clock }
	s = NewStore(&certmagic.FileStorage{Path: t.TempDir()}, now)
	u := costLimit(t, 1, nil)
	if err := s.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Active(ctx); err != nil || len(got) != 1 {
		t.Fatalf("active %v %v", got, err)
	}
	s.kv = failingKV{}
	clock = clock.Add(time.Minute)
	if got, err := s.Active(ctx); err != nil || len(got) != 1 {
		t.Fatalf("after a failed read: %v %v, want the known limit", got, err)
	}
}

// TestCreateWaitsForOtherInstances: with change notices (Redis), a limit
// created through one instance's store is in the other's set when Create
// returns, however fresh that set was: no clock moves, so only the
// notice can have brought it.
func TestCreateWaitsForOtherInstances(t *testing.T) {
	c := redistest.Client(t, 0)
	prefix := "llmgw:test:budgets:" + uuid.NewString() + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := time.Now()
	now := func() time.Time { return clock }
	var stores [2]*Store
	var heard [2]atomic.Int32
	for i := range stores {
		s := NewStore(kvstore.NewRedis(c, 0).WithPrefix(prefix), now)
		n := NewRedisNotice(c, prefix)
		s.SetNotifier(n)
		i := i
		go n.Watch(ctx, s, func() { heard[i].Add(1) })
		if got, err := s.Active(ctx); err != nil || len(got) != 0 {
			t.Fatalf("store %d: %v %v", i, got, err)
		}
		stores[i] = s
	}
	// Both subscribed: a notice published before would be lost.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := c.PubSubNumSub(ctx, prefix+storePrefix+":changed").Result()
		if err == nil && n[prefix+storePrefix+":changed"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watchers did not subscribe: %v %v", n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	u := costLimit(t, 1, nil)
	if err := stores[0].Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	got, err := stores[1].Active(ctx)
	if err != nil || len(got) != 1 || got[0].ID != u.ID {
		t.Fatalf("the other instance's set when Create returned: %v %v (notices heard %d), want the new limit", got, err, heard[1].Load())
	}
}

// TestCounterIsNanoDollars: a cost limit counts what each request cost
// to the nano-dollar, as the ledger records it (ledger.NanoFromUSD), not
// whole micro-dollars rounded up: a request of 6.45 µ$ leaves 6,450 n$
// (it left 7,000 before), so a 20 µ$ budget admits four such requests,
// the fourth on the 0.65 µ$ left (three before), and reports the 25.8 µ$
// they cost, as the ledger sums them. Limits in dollars convert exactly.
func TestCounterIsNanoDollars(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		usd       float64
		wantNano  int64
		wantLimit int64
	}{
		{0.00000645, 6_450, 20_000},
		{0.0000021, 2_100, 20_000},
		{0.000000001, 1, 20_000},
		{0.00000000049, 0, 20_000}, // below half a nano-dollar, as the ledger rounds it
	} {
		u := costLimit(t, 0.00002, nil)
		if got := u.Limit(); got != tc.wantLimit {
			t.Fatalf("limit of US$0.00002: %d n$, want %d", got, tc.wantLimit)
		}
		e := NewEnforcer(policies.NewMemoryLimiter(), fixedSource{u}, nil, nil)
		adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 5_000})
		if err != nil || refusal != nil {
			t.Fatalf("admit: %v %v", err, refusal)
		}
		if err := adm.Settle(ctx, costing(tc.usd)); err != nil {
			t.Fatal(err)
		}
		per := u.PeriodAt(e.now())
		spent, err := e.Spent(ctx, u, counterKey(u, u.Policy().GroupKey(attrs("k")), per.Label), per)
		if err != nil {
			t.Fatal(err)
		}
		if ledgerNano := ledger.NanoFromUSD(tc.usd); spent != tc.wantNano || spent != ledgerNano {
			t.Errorf("a request of US$%g left a counter of %d n$, want %d (the ledger's %d)", tc.usd, spent, tc.wantNano, ledgerNano)
		}
	}
	for usd, want := range map[float64]int64{0.57: 570_000_000, 0.29: 290_000_000, 1e9: 1e18} {
		u := costLimit(t, usd, nil)
		if got := u.Limit(); got != want {
			t.Errorf("limit of US$%g: %d n$, want %d", usd, got, want)
		}
	}

	u := costLimit(t, 0.00002, nil)
	e := NewEnforcer(policies.NewMemoryLimiter(), fixedSource{u}, nil, nil)
	e.MaxWait = 0
	admitted := 0
	for range 10 {
		adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 7_000})
		if err != nil {
			t.Fatal(err)
		}
		if refusal != nil {
			break
		}
		admitted++
		if err := adm.Settle(ctx, costing(0.00000645)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := e.Statuses(ctx, attrs("k"))
	if err != nil || len(st) != 1 {
		t.Fatalf("statuses %+v %v", st, err)
	}
	if admitted != 4 || st[0].Used != float64(4*6_450)/NanoPerUSD || st[0].Remaining != 0 {
		t.Errorf("%d requests of 6.45 µ$ admitted on 20 µ$, used %v remaining %v; want 4, 0.0000258 and 0",
			admitted, st[0].Used, st[0].Remaining)
	}
}

// fixedSeeder is a ledger that recorded used for every group.
type fixedSeeder int64

func (s fixedSeeder) Used(context.Context, *UsageLimit, *policies.Attributes, time.Time, time.Time) (int64, bool, error) {
	return int64(s), true, nil
}

// TestLegacyCounterCarriedOver: cost counters counted whole micro-dollars
// under other keys before. On a period's old counter of N µ$, the new
// counter's first use, by two enforcers (instances) on one Redis at the
// same moment, starts it at N × 1,000 n$ once, or at the ledger's count
// when that is more; what the old counter gains later (an instance of
// the older version still charging) is not carried again. Token counters
// keep their keys.
func TestLegacyCounterCarriedOver(t *testing.T) {
	for _, tc := range []struct {
		name       string
		oldMicro   int64
		ledgerNano int64 // -1: no ledger
		want       int64
	}{
		{"old counter, no ledger", 7_000, -1, 7_000_000},
		{"old counter above the ledger", 7_000, 6_450_000, 7_000_000},
		{"ledger above the old counter", 7_000, 7_500_123, 7_500_123},
		{"nothing to carry", 0, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redistest.Client(t, 0)
			prefix := "llmgw:test:budgets:" + uuid.NewString() + ":"
			t.Cleanup(func() {
				ctx := context.Background()
				for it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
					c.Del(ctx, it.Val())
				}
			})
			ctx := context.Background()
			clock := &steppedClock{t: time.Now()}
			lim := policies.NewRedisLimiter(c, policies.WithKeyPrefix(prefix))
			u := costLimit(t, 1, nil)
			per := u.PeriodAt(clock.Now())
			group := u.Policy().GroupKey(attrs("k"))
			oldKey := keyPrefix + group + "|" + per.Label
			if tc.oldMicro > 0 {
				if err := lim.Adjust(ctx, oldKey, legacyLimit(u), per.window(), tc.oldMicro); err != nil {
					t.Fatal(err)
				}
			}
			var inst [2]*Enforcer
			for i := range inst {
				inst[i] = NewEnforcer(lim, fixedSource{u}, nil, clock.Now)
				var s Seeder
				if tc.ledgerNano >= 0 {
					s = fixedSeeder(tc.ledgerNano)
				}
				inst[i].SetSeeder(s, RedisOnce{Client: c, Prefix: prefix})
			}
			// Both instances' first requests at once, each charged 1 µ$.
			var wg sync.WaitGroup
			const each = 5
			for i := range 2 * each {
				wg.Add(1)
				go func() {
					defer wg.Done()
					adm, refusal, err := inst[i%2].Admit(ctx, attrs("k"), Reserve{NanoUSD: 2_000})
					if err != nil || refusal != nil {
						t.Errorf("admit: %v %v", err, refusal)
						return
					}
					if err := adm.Settle(ctx, costing(0.000001)); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			newKey := counterKey(u, group, per.Label)
			spent := func() int64 {
				t.Helper()
				n, err := inst[1].Spent(ctx, u, newKey, per)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if got, want := spent(), tc.want+2*each*1_000; got != want {
				t.Fatalf("new counter %d n$ after %d requests of 1 µ$ on an old counter of %d µ$, want %d", got, 2*each, tc.oldMicro, want)
			}
			// The old counter grows; the markers are looked at again, and
			// nothing is carried a second time.
			if err := lim.Adjust(ctx, oldKey, legacyLimit(u), per.window(), 100_000); err != nil {
				t.Fatal(err)
			}
			clock.Advance(2 * seedCheckEvery)
			for _, e := range inst {
				adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 2_000})
				if err != nil || refusal != nil {
					t.Fatalf("admit: %v %v", err, refusal)
				}
				if err := adm.Settle(ctx, costing(0.000001)); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := spent(), tc.want+(2*each+2)*1_000; got != want {
				t.Errorf("new counter %d n$ after the old one grew, want %d (carried once)", got, want)
			}
			st, err := inst[0].Statuses(ctx, attrs("k"))
			if err != nil || len(st) != 1 || st[0].Used != float64(tc.want+(2*each+2)*1_000)/NanoPerUSD {
				t.Errorf("status %+v %v", st, err)
			}
		})
	}
	// A token limit's counter is where it was.
	u := costLimit(t, 1, nil)
	u.Type, u.CreditLimit = policies.TypeTokens, 1000
	if err := u.Prepare(); err != nil {
		t.Fatal(err)
	}
	if k := counterKey(u, "g", "2026-03"); k != "budget|g|2026-03" {
		t.Errorf("token counter key %q, want budget|g|2026-03", k)
	}
}
