package budgets

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
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
	adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{MicroUSD: 500})
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
	if adm, refusal, err := e.Admit(ctx, attrs("k"), Reserve{MicroUSD: 1}); adm != nil || refusal != nil || err != nil {
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
