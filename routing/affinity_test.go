package routing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// memRemote is a PinRemote in memory, with the Redis script's rules,
// counting its calls; down makes every call fail.
type memRemote struct {
	mu    sync.Mutex
	now   func() time.Time
	pins  map[uint64]memPin
	calls int
	down  bool
}

type memPin struct {
	child   int
	expires time.Time
}

func newMemRemote(now func() time.Time) *memRemote {
	return &memRemote{now: now, pins: map[uint64]memPin{}}
}

func (m *memRemote) Pin(_ context.Context, key uint64, old, cand int, ttl time.Duration) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.down {
		return 0, errors.New("down")
	}
	won := cand
	if p, ok := m.pins[key]; ok && m.now().Before(p.expires) && p.child != old {
		won = p.child
	}
	m.pins[key] = memPin{won, m.now().Add(2 * ttl)}
	return won, nil
}

func (m *memRemote) Drop(_ context.Context, key uint64, child int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.down {
		return errors.New("down")
	}
	if p, ok := m.pins[key]; ok && p.child == child {
		delete(m.pins, key)
	}
	return nil
}

func (m *memRemote) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

const threeTargets = `{"strategy":{"mode":"loadbalance","affinity":{}},"cb_config":{"failure_threshold":5,"cooldown_interval":60000},"targets":[` +
	`{"provider":"openai","api_key":"ka"},{"provider":"openai","api_key":"kb"},{"provider":"openai","api_key":"kc"}]}`

// affinityRouter is a router of one replica: its own breakers, random
// source and pin store, on a shared remote (nil: none).
func affinityRouter(seed uint64, clk *manualClock, remote PinRemote) (*Router, *fakeBreakers) {
	rt := testRouter(newFakeClock(), 0)
	rt.Float = rand.New(rand.NewPCG(seed, 3)).Float64
	br := newFakeBreakers()
	rt.Breakers = br
	var r PinRemote
	if remote != nil {
		r = remote
	}
	rt.Pins = NewPinStore(clk.now, r)
	return rt, br
}

// session runs one request of session id on rt and returns the target
// path that answered.
func session(t *testing.T, rt *Router, config, id string, ex Executor) string {
	t.Helper()
	res, err := rt.Run(context.Background(), benchPlan(t, config), &Request{Session: id}, ex)
	if err != nil {
		t.Fatal(err)
	}
	return res.Target.Path
}

// TestAffinityOneTargetAcrossReplicas: 100 turns of one session spread
// over three replicas sharing a remote all reach one target, each
// replica asking the remote once; other sessions spread over the
// targets.
func TestAffinityOneTargetAcrossReplicas(t *testing.T) {
	clk := newManualClock()
	remote := newMemRemote(clk.now)
	var replicas [3]*Router
	for i := range replicas {
		replicas[i], _ = affinityRouter(uint64(i+1), clk, remote)
	}
	ex := newTimed(map[string]time.Duration{})
	hits := map[string]int{}
	for turn := range 100 {
		hits[session(t, replicas[turn%3], threeTargets, "one", ex)]++
	}
	if len(hits) != 1 {
		t.Fatalf("one session reached %v", hits)
	}
	if n := remote.count(); n != 3 {
		t.Fatalf("%d remote calls for one session on three replicas, want 3", n)
	}
	spread := map[string]int{}
	for i := range 60 {
		spread[session(t, replicas[i%3], threeTargets, "s"+strconv.Itoa(i), ex)]++
	}
	if len(spread) != 3 {
		t.Fatalf("60 sessions reached %v, want all three targets", spread)
	}

	// After the TTL (10 minutes for OpenAI) each replica asks once more,
	// and the session stays where it was.
	clk.advance(cacheTTLLong + time.Second)
	before := remote.count()
	for turn := range 30 {
		hits[session(t, replicas[turn%3], threeTargets, "one", ex)]++
	}
	if len(hits) != 1 || remote.count()-before != 3 {
		t.Fatalf("after the TTL: %v, %d remote calls", hits, remote.count()-before)
	}
}

// TestAffinityMovesWhenUnhealthy: the session moves when its target's
// breaker opens, or (without a breaker) when an attempt on it fails the
// way a breaker counts, and then stays on its new target; a rate limit or
// a 400 keeps the pin.
func TestAffinityMovesWhenUnhealthy(t *testing.T) {
	noBreaker := strings.Replace(threeTargets, `"cb_config":{"failure_threshold":5,"cooldown_interval":60000},`, "", 1)
	tests := []struct {
		name string
		fail Outcome
		move bool
	}{
		{"server error", fail503, true},
		{"unreachable", unreachable, true},
		{"timeout", timeout408, true},
		{"quota exhausted", Outcome{Status: 429, ErrorType: "quota_exhausted"}, true},
		{"rate limited", Outcome{Status: 429, ErrorType: "rate_limited"}, false},
		{"invalid request", fail400, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newManualClock()
			rt, _ := affinityRouter(5, clk, newMemRemote(clk.now))
			ex := newTimed(map[string]time.Duration{})
			first := session(t, rt, noBreaker, "s", ex)
			failing := scriptedFail{ex, first, tt.fail}
			var got []string
			for range 20 {
				got = append(got, session(t, rt, noBreaker, "s", failing))
			}
			last := got[len(got)-1]
			for _, p := range got[10:] {
				if p != last {
					t.Fatalf("the session did not settle: %v", got)
				}
			}
			if moved := last != first; moved != tt.move {
				t.Fatalf("moved %v (from %s: %v), want %v", moved, first, got, tt.move)
			}
		})
	}
	t.Run("breaker open", func(t *testing.T) {
		clk := newManualClock()
		rt, br := affinityRouter(5, clk, newMemRemote(clk.now))
		ex := newTimed(map[string]time.Duration{})
		first := session(t, rt, threeTargets, "s", ex)
		br.open[first] = true
		next := session(t, rt, threeTargets, "s", ex)
		if next == first {
			t.Fatalf("the session stayed on %s, whose breaker is open", first)
		}
		// Once moved, it stays, even after the old target recovers.
		delete(br.open, first)
		for range 20 {
			if got := session(t, rt, threeTargets, "s", ex); got != next {
				t.Fatalf("the session left %s for %s", next, got)
			}
		}
	})
}

// scriptedFail answers path with o and every other target with a 200.
type scriptedFail struct {
	*timed
	path string
	o    Outcome
}

func (s scriptedFail) Attempt(ctx context.Context, t *Target, try int) Outcome {
	if t.Path == s.path {
		return s.o
	}
	return s.timed.Attempt(ctx, t, try)
}

// TestAffinityRemoteDown: with the remote failing, each replica keeps the
// session on one target of its own choosing.
func TestAffinityRemoteDown(t *testing.T) {
	clk := newManualClock()
	remote := newMemRemote(clk.now)
	remote.down = true
	rt, _ := affinityRouter(9, clk, remote)
	ex := newTimed(map[string]time.Duration{})
	hits := map[string]int{}
	for range 50 {
		hits[session(t, rt, threeTargets, "down", ex)]++
	}
	if len(hits) != 1 {
		t.Fatalf("without the remote one session reached %v", hits)
	}
	// And past the TTL (an active session keeps its local pin for twice it).
	clk.advance(cacheTTLLong + time.Second)
	for range 10 {
		hits[session(t, rt, threeTargets, "down", ex)]++
	}
	if len(hits) != 1 {
		t.Fatalf("past the TTL without the remote: %v", hits)
	}
}

// TestAffinityTTL: the configured TTL, else the providers' cache
// lifetime; affinity outside loadbalance is refused.
func TestAffinityTTL(t *testing.T) {
	leaf := func(provider string) *Node {
		return &Node{Target: &Target{Settings: providers.Settings{Provider: provider}}}
	}
	group := func(children ...*Node) *Node {
		return &Node{Strategy: &Strategy{Mode: ModeLoadBalance, Affinity: &Affinity{}}, Children: children}
	}
	tests := []struct {
		name string
		node *Node
		want time.Duration
	}{
		{"openai", group(leaf("openai"), leaf("azure-openai")), cacheTTLLong},
		{"anthropic and bedrock", group(leaf("anthropic"), leaf("bedrock")), cacheTTLShort},
		{"the longest", group(leaf("anthropic"), group(leaf("openai"))), cacheTTLLong},
		{"configured", &Node{Strategy: &Strategy{Mode: ModeLoadBalance, Affinity: &Affinity{TTL: 42}}, Children: []*Node{leaf("anthropic")}}, 42 * time.Second},
	}
	for _, tt := range tests {
		rt, _ := affinityRouter(1, newManualClock(), nil)
		r := &run{rt: rt, req: &Request{Session: "x"}}
		if p := r.pinOf(tt.node); !p.ok || p.ttl != tt.want {
			t.Errorf("%s: ttl %v (ok %v), want %v", tt.name, p.ttl, p.ok, tt.want)
		}
	}
	_, err := resolveHeaders(t, "x-gateway-config", `{"strategy":{"mode":"fallback","affinity":{}},"targets":[{"provider":"openai","api_key":"k"}]}`)
	if err == nil || !strings.Contains(err.Error(), "config.strategy.affinity") {
		t.Fatalf("affinity on a fallback: %v", err)
	}
	_, err = resolveHeaders(t, "x-gateway-config", `{"strategy":{"mode":"loadbalance","affinity":{"ttl":0}},"targets":[{"provider":"openai","api_key":"k"}]}`)
	if err == nil {
		t.Fatal("a ttl of 0 must be refused")
	}
}

// TestPinStoreBounded: the local map never holds more than maxPins.
func TestPinStoreBounded(t *testing.T) {
	clk := newManualClock()
	s := NewPinStore(clk.now, nil)
	for i := range maxPins + 5000 {
		s.pin(context.Background(), uint64(i)*0x9e3779b97f4a7c15, -1, 0, time.Minute)
	}
	if n := s.Len(); n > maxPins {
		t.Fatalf("%d pins held, bound %d", n, maxPins)
	}
}

// BenchmarkAffinityDecision is the decision of a request whose session is
// pinned locally: its session key read from the header, the node's pin
// key, the local lookup and the pinned child's checks. It must stay under
// 1 µs and allocate nothing.
func BenchmarkAffinityDecision(b *testing.B) {
	// A long conversation: 100 turns after the system prompt, each of
	// a few sentences, with metadata after the messages (the top-level
	// walk passes all of them to find it).
	var long strings.Builder
	long.WriteString(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."}`)
	for i := range 100 {
		role := [2]string{"user", "assistant"}[i%2]
		fmt.Fprintf(&long, `,{"role":%q,"content":"Turn %d: a sentence or two of conversation, long enough to be typical of a chat, with a \"quote\" in it."}`, role, i)
	}
	long.WriteString(`],"metadata":{"team":"a"},"stream":true}`)
	for _, tc := range []struct{ name, body string }{
		{SessionHeader, ""},
		{SessionConversaton, `{"model":"gpt-4o","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise this document for me."},{"role":"assistant","content":"Sure."},{"role":"user","content":"Now shorter."}]}`},
		{SessionConversaton + "_100_turns", long.String()},
	} {
		b.Run(tc.name, func(b *testing.B) {
			clk := newManualClock()
			rt := testRouter(newFakeClock(), 0.5)
			rt.Breakers = newFakeBreakers()
			rt.Pins = NewPinStore(clk.now, newMemRemote(clk.now))
			p := benchPlan(b, threeTargets)
			req := &Request{Session: "bench-session"}
			if tc.body != "" {
				if err := jsonlimit.Object([]byte(tc.body)); err != nil {
					b.Fatal(err)
				}
				req = &Request{Params: []byte(tc.body)}
			}
			r := &run{rt: rt, ctx: context.Background(), req: req}
			excluded := newChildSet(3)
			pin := r.pinOf(p.Root)
			if _, err := r.pinnedPick(p.Root, &excluded, &pin); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.sessionRead = false // a new request reads its session again
				pin := r.pinOf(p.Root)
				if i, err := r.pinnedPick(p.Root, &excluded, &pin); err != nil || i < 0 {
					b.Fatal(i, err)
				}
			}
		})
	}
}
