package routing

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
)

// manualClock is the load registry's clock, moved by hand.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// timed answers every attempt at once with a 200 whose first byte took
// the target's configured time (by path), and counts the attempts.
type timed struct {
	mu    sync.Mutex
	ttfb  map[string]time.Duration
	fail  map[string]int
	calls map[string]int
}

func newTimed(ttfb map[string]time.Duration) *timed {
	return &timed{ttfb: ttfb, fail: map[string]int{}, calls: map[string]int{}}
}

func (x *timed) Cached(context.Context, *Target) (Outcome, bool) { return Outcome{}, false }

func (x *timed) Attempt(_ context.Context, t *Target, _ int) Outcome {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.calls[t.Path]++
	if s := x.fail[t.Path]; s != 0 {
		return Outcome{Status: s}
	}
	return Outcome{Status: 200, Committed: true, FirstByte: x.ttfb[t.Path]}
}

func (x *timed) set(path string, d time.Duration) {
	x.mu.Lock()
	x.ttfb[path] = d
	x.mu.Unlock()
}

func (x *timed) take() map[string]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	c := x.calls
	x.calls = map[string]int{}
	return c
}

// balanceRouter is a router with a seeded random source and a load
// registry on clk.
func balanceRouter(clk *manualClock) *Router {
	rt := testRouter(newFakeClock(), 0)
	rt.Float = rand.New(rand.NewPCG(7, 11)).Float64
	rt.Loads = NewLoadStats(clk.now)
	rt.Prices = cost.Builtin
	return rt
}

func newManualClock() *manualClock {
	return &manualClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// runN sends n requests through p, each on a fresh plan (as requests
// are), and returns the attempts per target path.
func runN(t testing.TB, rt *Router, config string, req *Request, ex Executor, n int) {
	t.Helper()
	for range n {
		p := benchPlan(t, config)
		if _, err := rt.Run(context.Background(), p, req, ex); err != nil {
			t.Fatal(err)
		}
	}
}

func benchPlan(t testing.TB, config string) *Plan {
	t.Helper()
	in, err := ingress.Parse(http.Header{"X-Gateway-Api-Key": {"gw-test"}, "X-Gateway-Config": {config}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Resolve(in, testResolver, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func lbConfig(mode string, a, b string) string {
	return `{"strategy":{"mode":"loadbalance","loadbalance":"` + mode + `"},"targets":[` + a + `,` + b + `]}`
}

const (
	leafA = `{"provider":"openai","api_key":"ka"}`
	leafB = `{"provider":"openai","api_key":"kb"}`
)

// TestLeastLatency: with one target 200 ms slower, least_latency sends
// all but the two first measuring requests to the faster one; once the
// slow one recovers, the probes it gets every ProbeAfter bring it back
// within a few rounds, after which the two share the traffic.
func TestLeastLatency(t *testing.T) {
	clk := newManualClock()
	rt := balanceRouter(clk)
	cfg := lbConfig("least_latency", leafA, leafB)
	ex := newTimed(map[string]time.Duration{t0: 2 * time.Millisecond, t1: 202 * time.Millisecond})

	runN(t, rt, cfg, &Request{}, ex, 300)
	got := ex.take()
	if got[t0] != 299 || got[t1] != 1 {
		t.Fatalf("fast %d slow %d of 300: want every request but the slow target's one measurement on the fast one", got[t0], got[t1])
	}

	// A probe every ProbeAfter, not more: the clock stands still here.
	clk.advance(ProbeAfter)
	runN(t, rt, cfg, &Request{}, ex, 100)
	if got = ex.take(); got[t1] != 1 {
		t.Fatalf("the slow target got %d of 100 requests after ProbeAfter, want exactly its probe", got[t1])
	}

	ex.set(t1, 2*time.Millisecond)
	rounds := 0
	for ; rounds < 10; rounds++ {
		clk.advance(ProbeAfter + time.Second)
		runN(t, rt, cfg, &Request{}, ex, 100)
		if got = ex.take(); got[t1] >= 30 {
			break
		}
	}
	if rounds == 10 {
		t.Fatalf("the recovered target never came back: %v in the last round", got)
	}
	if rounds > 4 {
		t.Fatalf("the recovered target took %d probe rounds to come back", rounds+1)
	}
}

// TestLeastLatencyWeightsBreakTies: equally fast targets share the
// traffic by weight; a weight of 0 is never chosen.
func TestLeastLatencyWeightsBreakTies(t *testing.T) {
	rt := balanceRouter(newManualClock())
	ex := newTimed(map[string]time.Duration{t0: 100 * time.Millisecond, t1: 101 * time.Millisecond})
	cfg := lbConfig("least_latency", `{"provider":"openai","api_key":"ka","weight":3}`, `{"provider":"openai","api_key":"kb","weight":1}`)
	runN(t, rt, cfg, &Request{}, ex, 4000)
	got := ex.take()
	if share := float64(got[t0]) / 4000; share < 0.72 || share > 0.78 {
		t.Fatalf("weight-3 target got %.3f of equal-latency traffic, want 0.75±0.03 (%v)", share, got)
	}
	cfg = lbConfig("least_latency", `{"provider":"openai","api_key":"ka","weight":0}`, leafB)
	runN(t, rt, cfg, &Request{}, ex, 50)
	if got = ex.take(); got[t0] != 0 {
		t.Fatalf("a zero-weight target was chosen %d times", got[t0])
	}
}

// TestLeastLatencyFailuresCount: a target failing fast with 5xx does not
// look fast: its failures count as twice its average.
func TestLeastLatencyFailuresCount(t *testing.T) {
	rt := balanceRouter(newManualClock())
	ex := newTimed(map[string]time.Duration{t0: 10 * time.Millisecond, t1: 30 * time.Millisecond})
	cfg := lbConfig("least_latency", leafA, leafB)
	runN(t, rt, cfg, &Request{}, ex, 20)
	ex.take()
	ex.fail[t0] = 503
	runN(t, rt, cfg, &Request{}, ex, 60)
	if got := ex.take(); got[t1] < 45 {
		t.Fatalf("traffic stayed on the failing target: %v", got)
	}
}

// TestLeastInflight: the power of two choices prefers the target with
// fewer attempts in flight per unit of weight.
func TestLeastInflight(t *testing.T) {
	rt := balanceRouter(newManualClock())
	ex := newTimed(nil)
	cfg := lbConfig("least_inflight", leafA, leafB)
	busy := rt.Loads.Of(benchPlan(t, cfg).Leaves[0])
	busy.inflight.Add(3)
	runN(t, rt, cfg, &Request{}, ex, 100)
	if got := ex.take(); got[t1] != 100 {
		t.Fatalf("with 3 in flight on a, want every request on b: %v", got)
	}
	// Weight 4 with 2 in flight is (2+1)/4 = 0.75 per weight, below the
	// idle weight-1 target's 1.
	cfg = lbConfig("least_inflight", `{"provider":"openai","api_key":"ka","weight":4}`, leafB)
	busy.inflight.Add(-1)
	runN(t, rt, cfg, &Request{}, ex, 100)
	if got := ex.take(); got[t0] != 100 {
		t.Fatalf("want every request on the heavier target: %v", got)
	}
	busy.inflight.Add(-2)
	runN(t, rt, cfg, &Request{}, ex, 2000)
	if got := ex.take(); got[t0] < 1500 {
		t.Fatalf("idle targets share by weight: %v", got)
	}
}

// TestCheapest: the catalog's price for the request's estimated tokens
// picks the target; an unpriced model comes last; equal prices share by
// weight.
func TestCheapest(t *testing.T) {
	rt := balanceRouter(newManualClock())
	ex := newTimed(nil)
	req := &Request{Params: []byte(`{"model":"gpt-4o","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`)}
	mini := `{"provider":"openai","api_key":"ka","override_params":{"model":"gpt-4o-mini"}}`
	tests := []struct {
		name, a, b string
		want       string
	}{
		{"the cheaper model", leafA, mini, t1},
		{"an unpriced model comes last", `{"provider":"openai","api_key":"ka","override_params":{"model":"gpt-9-imaginary"}}`, leafB, t1},
		{"the request's model against an override", mini, leafB, t0},
	}
	for _, tt := range tests {
		runN(t, rt, lbConfig("cheapest", tt.a, tt.b), req, ex, 50)
		if got := ex.take(); got[tt.want] != 50 {
			t.Errorf("%s: %v, want all on %s", tt.name, got, tt.want)
		}
	}
	runN(t, rt, lbConfig("cheapest", leafA, leafB), req, ex, 1000)
	if got := ex.take(); got[t0] < 400 || got[t1] < 400 {
		t.Errorf("equal prices share by weight: %v", got)
	}
}

// TestBalanceModeRefused: an unknown mode is a 400 listing the modes,
// and the field belongs to loadbalance strategies.
func TestBalanceModeRefused(t *testing.T) {
	tests := []struct{ cfg, param, msg string }{
		{lbConfig("fastest", leafA, leafB), "config.strategy.loadbalance",
			`must be one of "weighted", "least_latency", "least_inflight", "cheapest" but found "fastest"`},
		{`{"strategy":{"mode":"fallback","loadbalance":"cheapest"},"targets":[` + leafA + `,` + leafB + `]}`, "config.strategy.loadbalance",
			`names how a loadbalance strategy picks, and this one's mode is "fallback"`},
	}
	for _, tt := range tests {
		_, err := resolveHeaders(t, "x-gateway-config", tt.cfg)
		var ae *apierror.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tt.param || !strings.Contains(ae.Message, tt.msg) {
			t.Errorf("%s: got %v", tt.cfg, err)
		}
	}
}

// TestLoadStatsBounded: measurements are per target identity and model,
// and idle ones are swept.
func TestLoadStatsBounded(t *testing.T) {
	clk := newManualClock()
	s := NewLoadStats(clk.now)
	a := benchPlan(t, `{"provider":"openai","api_key":"ka"}`).Leaves[0]
	a2 := benchPlan(t, `{"provider":"openai","api_key":"ka"}`).Leaves[0]
	m := benchPlan(t, `{"provider":"openai","api_key":"ka","override_params":{"model":"gpt-4o-mini"}}`).Leaves[0]
	if s.Of(a) != s.Of(a2) || s.Of(a) == s.Of(m) || s.Len() != 2 {
		t.Fatalf("one measurement per target and model: %d", s.Len())
	}
	clk.advance(LoadIdleTTL + 2*loadSweepEvery)
	s.Of(benchPlan(t, `{"provider":"openai","api_key":"kc"}`).Leaves[0])
	if s.Len() != 1 {
		t.Fatalf("idle measurements kept: %d", s.Len())
	}
}

// BenchmarkBalanceDecision is the routing decision of one request: the
// candidates, their measurements looked up from a fresh plan's targets
// (as every request's are), and the pick. It must stay under 1 µs and
// allocate nothing for least_latency and least_inflight.
func BenchmarkBalanceDecision(b *testing.B) {
	for _, mode := range []string{BalanceWeighted, BalanceLeastLatency, BalanceLeastInflight, BalanceCheapest} {
		b.Run(mode, func(b *testing.B) {
			clk := newManualClock()
			rt := balanceRouter(clk)
			cfg := `{"strategy":{"mode":"loadbalance","loadbalance":"` + mode + `"},"targets":[` +
				`{"provider":"openai","api_key":"ka"},{"provider":"openai","api_key":"kb"},{"provider":"groq","api_key":"kc","override_params":{"model":"llama-3.1-8b-instant"}}]}`
			p := benchPlan(b, cfg)
			ex := newTimed(map[string]time.Duration{t0: time.Millisecond, t1: 2 * time.Millisecond, "config.targets[2]": 3 * time.Millisecond})
			runN(b, rt, cfg, &Request{}, ex, 10)
			req := &Request{Params: []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)}
			r := &run{rt: rt, ctx: context.Background(), req: req}
			excluded := newChildSet(3)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, t := range p.Leaves {
					t.load = nil // a new request's targets look their measurements up again
				}
				if i, err := r.pick(p.Root, &excluded); err != nil || i < 0 {
					b.Fatal(i, err)
				}
			}
		})
	}
}

// BenchmarkBalancedRun is a whole Run of a fresh three-target plan with
// an executor that answers at once: the difference between a mode and
// weighted is what the mode adds to a request, the measurements every
// attempt records included.
func BenchmarkBalancedRun(b *testing.B) {
	for _, mode := range []string{BalanceWeighted, BalanceLeastLatency, BalanceLeastInflight} {
		b.Run(mode, func(b *testing.B) {
			rt := balanceRouter(newManualClock())
			cfg := `{"strategy":{"mode":"loadbalance","loadbalance":"` + mode + `"},"targets":[` +
				`{"provider":"openai","api_key":"ka"},{"provider":"openai","api_key":"kb"},{"provider":"groq","api_key":"kc"}]}`
			p := benchPlan(b, cfg)
			ex := nopExec{}
			req := &Request{}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, t := range p.Leaves {
					t.load = nil
				}
				if _, err := rt.Run(context.Background(), p, req, ex); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nopExec answers every attempt with a 200 whose first byte took 1 ms.
type nopExec struct{}

func (nopExec) Cached(context.Context, *Target) (Outcome, bool) { return Outcome{}, false }
func (nopExec) Attempt(context.Context, *Target, int) Outcome {
	return Outcome{Status: 200, Committed: true, FirstByte: time.Millisecond}
}
