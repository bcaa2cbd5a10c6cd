package routing

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
)

// script is a fake Executor: each target path answers from its list of
// outcomes in turn (the last one repeats), and every call is recorded.
type script struct {
	answers map[string][]Outcome
	cached  map[string]bool
	calls   []string // "path#try"
	n       map[string]int
}

func newScript(answers map[string][]Outcome) *script {
	return &script{answers: answers, cached: map[string]bool{}, n: map[string]int{}}
}

func (s *script) Cached(_ context.Context, t *Target) (Outcome, bool) {
	if s.cached[t.Path] {
		s.calls = append(s.calls, t.Path+"#cache")
		return Outcome{Status: 200, Committed: true, Cached: true}, true
	}
	return Outcome{}, false
}

func (s *script) Attempt(_ context.Context, t *Target, try int) Outcome {
	s.calls = append(s.calls, fmt.Sprintf("%s#%d", t.Path, try))
	seq := s.answers[t.Path]
	if len(seq) == 0 {
		return Outcome{Status: 200, Committed: true}
	}
	i := min(s.n[t.Path], len(seq)-1)
	s.n[t.Path]++
	o := seq[i]
	if o.OK() {
		o.Committed = true
	}
	return o
}

// fakeClock is a clock whose Sleep advances time instead of waiting.
type fakeClock struct {
	t      time.Time
	slept  []time.Duration
	cancel bool // Sleep reports the client gone
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time { return c.t }

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	if c.cancel {
		return context.Canceled
	}
	c.t = c.t.Add(d)
	return nil
}

// fakeBreakers marks targets open by path.
type fakeBreakers struct {
	open map[string]bool
	// openAfter opens a path after this many reported outcomes.
	openAfter map[string]int
	reported  map[string][]Outcome
}

func newFakeBreakers(open ...string) *fakeBreakers {
	f := &fakeBreakers{open: map[string]bool{}, openAfter: map[string]int{}, reported: map[string][]Outcome{}}
	for _, p := range open {
		f.open[p] = true
	}
	return f
}

func (f *fakeBreakers) Allow(t *Target) (func(Outcome), bool) {
	if f.open[t.Path] {
		return nil, false
	}
	return func(o Outcome) {
		f.reported[t.Path] = append(f.reported[t.Path], o)
		if n, ok := f.openAfter[t.Path]; ok && len(f.reported[t.Path]) >= n {
			f.open[t.Path] = true
		}
	}, true
}

func (f *fakeBreakers) Open(t *Target) bool { return f.open[t.Path] }

// testRouter returns a router on a fake clock whose random source always
// returns r.
func testRouter(clk *fakeClock, r float64) *Router {
	rt := NewRouter()
	rt.Float = func() float64 { return r }
	rt.Now, rt.Sleep = clk.Now, clk.Sleep
	return rt
}

func mustPlan(t *testing.T, config string, kv ...string) *Plan {
	t.Helper()
	p, err := resolveHeaders(t, append([]string{"x-gateway-config", config}, kv...)...)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return p
}

// stepSummary renders steps as "path:outcome" for compact assertions.
func stepSummary(steps []Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.Target.Path + ":" + s.Outcome
	}
	return strings.Join(parts, " ")
}

// Outcome shorthands.
var (
	ok200       = Outcome{Status: 200}
	fail500     = Outcome{Status: 500}
	fail503     = Outcome{Status: 503}
	fail400     = Outcome{Status: 400}
	timeout408  = Outcome{Status: 408, Cause: CauseTimeout}
	unreachable = Outcome{Status: 502, Cause: CauseUnreachable}
)

// two leaves, a and b, under the given strategy JSON.
func twoTargets(strategy string, extra ...string) string {
	a, b := `{"provider":"openai","api_key":"ka","name":"a"}`, `{"provider":"groq","api_key":"kb","name":"b"}`
	if len(extra) == 2 {
		a, b = extra[0], extra[1]
	}
	return `{"strategy":` + strategy + `,"targets":[` + a + `,` + b + `]}`
}

// requestWithMetadata builds the routing request the handler would for an
// x-gateway-metadata header (empty: none).
func requestWithMetadata(t *testing.T, meta string) *Request {
	t.Helper()
	h := http.Header{}
	if meta != "" {
		h.Set("x-gateway-metadata", meta)
	}
	in, err := ingress.Parse(h)
	if err != nil {
		t.Fatal(err)
	}
	return &Request{Metadata: in.Metadata, MetadataRaw: in.MetadataRaw}
}
