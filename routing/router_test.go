package routing

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
)

const (
	t0 = "config.targets[0]"
	t1 = "config.targets[1]"
)

func TestStrategies(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		answers map[string][]Outcome
		float   float64
		meta    string // x-gateway-metadata
		status  int
		calls   string
		steps   string
	}{
		{"single takes the first target", twoTargets(`{"mode":"single"}`), nil, 0, "",
			200, t0 + "#0", t0 + ":ok"},
		{"fallback on any non-2xx without a list", twoTargets(`{"mode":"fallback"}`),
			map[string][]Outcome{t0: {fail500}}, 0, "",
			200, t0 + "#0 " + t1 + "#0", t0 + ":fallback " + t1 + ":ok"},
		{"fallback on 4xx too without a list", twoTargets(`{"mode":"fallback"}`),
			map[string][]Outcome{t0: {fail400}}, 0, "",
			200, t0 + "#0 " + t1 + "#0", t0 + ":fallback " + t1 + ":ok"},
		{"fallback stops on an unlisted status", twoTargets(`{"mode":"fallback","on_status_codes":[429]}`),
			map[string][]Outcome{t0: {fail500}}, 0, "",
			500, t0 + "#0", t0 + ":error"},
		{"fallback moves on a listed status", twoTargets(`{"mode":"fallback","on_status_codes":[429,500]}`),
			map[string][]Outcome{t0: {fail500}}, 0, "",
			200, t0 + "#0 " + t1 + "#0", t0 + ":fallback " + t1 + ":ok"},
		{"fallback on a timeout", twoTargets(`{"mode":"fallback"}`),
			map[string][]Outcome{t0: {timeout408}}, 0, "",
			200, t0 + "#0 " + t1 + "#0", t0 + ":timeout " + t1 + ":ok"},
		{"fallback on an unreachable upstream", twoTargets(`{"mode":"fallback"}`),
			map[string][]Outcome{t0: {unreachable}}, 0, "",
			200, t0 + "#0 " + t1 + "#0", t0 + ":unreachable " + t1 + ":ok"},
		{"a timeout is a 408 to on_status_codes", twoTargets(`{"mode":"fallback","on_status_codes":[500]}`),
			map[string][]Outcome{t0: {timeout408}}, 0, "",
			408, t0 + "#0", t0 + ":timeout"},
		{"fallback returns the last answer when all fail", twoTargets(`{"mode":"fallback"}`),
			map[string][]Outcome{t0: {fail500}, t1: {fail503}}, 0, "",
			503, t0 + "#0 " + t1 + "#0", t0 + ":fallback " + t1 + ":error"},
		{"never fall back from a committed answer", twoTargets(`{"mode":"fallback"}`),
			map[string][]Outcome{t0: {{Status: 200, Committed: true, Cause: CauseStreamFailed}}}, 0, "",
			200, t0 + "#0", t0 + ":stream_failed"},
		{"never fall back after the client left", twoTargets(`{"mode":"fallback"}`),
			map[string][]Outcome{t0: {{Status: 499, Committed: true, Cause: CauseClientGone}}}, 0, "",
			499, t0 + "#0", t0 + ":client_closed"},
		{"loadbalance picks by weight (low draw)", twoTargets(`{"mode":"loadbalance"}`,
			`{"provider":"openai","api_key":"a","weight":1}`, `{"provider":"openai","api_key":"b","weight":3}`), nil, 0.2, "",
			200, t0 + "#0", t0 + ":ok"},
		{"loadbalance picks by weight (high draw)", twoTargets(`{"mode":"loadbalance"}`,
			`{"provider":"openai","api_key":"a","weight":1}`, `{"provider":"openai","api_key":"b","weight":3}`), nil, 0.3, "",
			200, t1 + "#0", t1 + ":ok"},
		{"loadbalance never picks a zero weight", twoTargets(`{"mode":"loadbalance"}`,
			`{"provider":"openai","api_key":"a","weight":0}`, `{"provider":"openai","api_key":"b"}`), nil, 0, "",
			200, t1 + "#0", t1 + ":ok"},
		{"nested fallback inside loadbalance",
			`{"strategy":{"mode":"loadbalance"},"targets":[
				{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"a"},{"provider":"groq","api_key":"b"}]},
				{"provider":"openai","api_key":"c","weight":0}]}`,
			map[string][]Outcome{t0 + ".targets[0]": {fail503}}, 0.5, "",
			200, t0 + ".targets[0]#0 " + t0 + ".targets[1]#0", t0 + ".targets[0]:fallback " + t0 + ".targets[1]:ok"},
		{"conditional routes by metadata", `{"strategy":{"mode":"conditional","conditions":[{"query":{"metadata.plan":"pro"},"then":"b"}],"default":"a"},
			"targets":[{"provider":"openai","api_key":"a","name":"a"},{"provider":"groq","api_key":"b","name":"b"}]}`,
			nil, 0, `{"plan":"pro"}`, 200, t1 + "#0", t1 + ":ok"},
		{"conditional falls to the default", `{"strategy":{"mode":"conditional","conditions":[{"query":{"metadata.plan":"pro"},"then":"b"}],"default":"a"},
			"targets":[{"provider":"openai","api_key":"a","name":"a"},{"provider":"groq","api_key":"b","name":"b"}]}`,
			nil, 0, `{"plan":"free"}`, 200, t0 + "#0", t0 + ":ok"},
		{"outer fallback relabels an exhausted inner fallback",
			`{"strategy":{"mode":"fallback"},"targets":[
				{"strategy":{"mode":"fallback"},"targets":[{"provider":"openai","api_key":"a"},{"provider":"groq","api_key":"b"}]},
				{"provider":"openai","api_key":"c"}]}`,
			map[string][]Outcome{t0 + ".targets[0]": {fail500}, t0 + ".targets[1]": {fail503}}, 0, "",
			200, t0 + ".targets[0]#0 " + t0 + ".targets[1]#0 " + t1 + "#0",
			t0 + ".targets[0]:fallback " + t0 + ".targets[1]:fallback " + t1 + ":ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kv []string
			if tt.meta != "" {
				kv = []string{"x-gateway-metadata", tt.meta}
			}
			p := mustPlan(t, tt.config, kv...)
			req := requestWithMetadata(t, tt.meta)
			s := newScript(tt.answers)
			res, err := testRouter(newFakeClock(), tt.float).Run(context.Background(), p, req, s)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || strings.Join(s.calls, " ") != tt.calls || stepSummary(res.Steps) != tt.steps {
				t.Fatalf("got %d calls [%s] steps [%s]\nwant %d calls [%s] steps [%s]",
					res.Status, strings.Join(s.calls, " "), stepSummary(res.Steps), tt.status, tt.calls, tt.steps)
			}
		})
	}
}

// TestLoadBalanceDistribution draws from a fixed-seed source, so the
// counts are the same on every run while still exercising real
// randomness across many picks.
func TestLoadBalanceDistribution(t *testing.T) {
	p := mustPlan(t, `{"strategy":{"mode":"loadbalance"},"targets":[
		{"provider":"openai","api_key":"a","weight":1},{"provider":"openai","api_key":"b","weight":3},
		{"provider":"openai","api_key":"c","weight":0},{"provider":"openai","api_key":"d","weight":0.5}]}`)
	rt := testRouter(newFakeClock(), 0)
	rt.Float = rand.New(rand.NewPCG(1, 2)).Float64
	counts := map[string]int{}
	const n = 20000
	for range n {
		s := newScript(nil)
		res, err := rt.Run(context.Background(), p, &Request{}, s)
		if err != nil {
			t.Fatal(err)
		}
		counts[res.Target.Path]++
	}
	want := map[string]float64{"config.targets[0]": 1 / 4.5, "config.targets[1]": 3 / 4.5, "config.targets[3]": 0.5 / 4.5}
	for path, share := range want {
		got := float64(counts[path]) / n
		if got < share-0.02 || got > share+0.02 {
			t.Errorf("%s chosen %.3f of the time, want %.3f±0.02", path, got, share)
		}
	}
	if counts["config.targets[2]"] != 0 {
		t.Errorf("a zero-weight target was chosen %d times", counts["config.targets[2]"])
	}
}

func TestRetries(t *testing.T) {
	retryAfter50 := Outcome{Status: 429, RetryAfter: 50 * time.Millisecond, HasRetryAfter: true}
	tests := []struct {
		name    string
		retry   string
		answers []Outcome
		status  int
		calls   int
		retries int
		steps   string
		slept   []time.Duration // nil: only check the count of sleeps = retries
	}{
		{"retries until success", `{"attempts":2}`, []Outcome{fail503, fail503, ok200}, 200, 3, 2, "retry retry ok", nil},
		{"gives up after attempts", `{"attempts":2}`, []Outcome{fail503}, 503, 3, 2, "retry retry error", nil},
		{"unlisted status is not retried", `{"attempts":3}`, []Outcome{fail400}, 400, 1, 0, "error", nil},
		{"custom list", `{"attempts":1,"on_status_codes":[400]}`, []Outcome{fail400, ok200}, 200, 2, 1, "retry ok", nil},
		{"custom list replaces the defaults", `{"attempts":1,"on_status_codes":[400]}`, []Outcome{fail503}, 503, 1, 0, "error", nil},
		{"timeouts are retried whatever the list", `{"attempts":1,"on_status_codes":[400]}`, []Outcome{timeout408, ok200}, 200, 2, 1, "timeout ok", nil},
		{"unreachable is retried whatever the list", `{"attempts":1,"on_status_codes":[400]}`, []Outcome{unreachable, ok200}, 200, 2, 1, "unreachable ok", nil},
		{"gateway refusals are not retried", `{"attempts":2}`, []Outcome{{Status: 502, Cause: CauseLocal}}, 502, 1, 0, "error", nil},
		{"zero attempts", `{"attempts":0}`, []Outcome{fail503}, 503, 1, 0, "error", nil},
		{"retry-after honoured", `{"attempts":1,"use_retry_after_headers":true}`, []Outcome{retryAfter50, ok200}, 200, 2, 1, "retry ok",
			[]time.Duration{50 * time.Millisecond}},
		{"retry-after honoured (singular spelling)", `{"attempts":1,"use_retry_after_header":true}`, []Outcome{retryAfter50, ok200}, 200, 2, 1, "retry ok",
			[]time.Duration{50 * time.Millisecond}},
		{"retry-after ignored unless asked", `{"attempts":1}`, []Outcome{retryAfter50, ok200}, 200, 2, 1, "retry ok",
			[]time.Duration{0}}, // backoff with a zero draw
		{"retry-after beyond the budget returns the failure", `{"attempts":3,"use_retry_after_headers":true}`,
			[]Outcome{{Status: 429, RetryAfter: 61 * time.Second, HasRetryAfter: true}}, 429, 1, 0, "retry_after_exceeds_budget", []time.Duration{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, `{"provider":"openai","api_key":"k","retry":`+tt.retry+`}`)
			clk := newFakeClock()
			s := newScript(map[string][]Outcome{"config": tt.answers})
			res, err := testRouter(clk, 0).Run(context.Background(), p, &Request{}, s)
			if err != nil {
				t.Fatal(err)
			}
			var labels []string
			for _, st := range res.Steps {
				labels = append(labels, st.Outcome)
			}
			if res.Status != tt.status || len(s.calls) != tt.calls || res.Retries != tt.retries || strings.Join(labels, " ") != tt.steps {
				t.Fatalf("got status %d, %d calls, %d retries, steps %v", res.Status, len(s.calls), res.Retries, labels)
			}
			if tt.slept != nil {
				if len(clk.slept) != len(tt.slept) {
					t.Fatalf("slept %v, want %v", clk.slept, tt.slept)
				}
				for i := range tt.slept {
					if clk.slept[i] != tt.slept[i] {
						t.Fatalf("slept %v, want %v", clk.slept, tt.slept)
					}
				}
			} else if len(clk.slept) != tt.retries {
				t.Fatalf("slept %d times for %d retries", len(clk.slept), tt.retries)
			}
		})
	}
}

func TestRetriesBeforeFallback(t *testing.T) {
	p := mustPlan(t, twoTargets(`{"mode":"fallback"}`,
		`{"provider":"openai","api_key":"a","retry":{"attempts":2}}`, `{"provider":"groq","api_key":"b"}`))
	s := newScript(map[string][]Outcome{t0: {fail503}})
	res, err := testRouter(newFakeClock(), 0).Run(context.Background(), p, &Request{}, s)
	if err != nil {
		t.Fatal(err)
	}
	want := t0 + "#0 " + t0 + "#1 " + t0 + "#2 " + t1 + "#0"
	if strings.Join(s.calls, " ") != want || stepSummary(res.Steps) != t0+":retry "+t0+":retry "+t0+":fallback "+t1+":ok" {
		t.Fatalf("calls %v steps %s", s.calls, stepSummary(res.Steps))
	}
	if res.Target.Path != t1 || res.Retries != 0 {
		t.Fatalf("answered by %s after %d retries", res.Target.Path, res.Retries)
	}
}

func TestRetryStopsWhenClientLeaves(t *testing.T) {
	p := mustPlan(t, `{"provider":"openai","api_key":"k","retry":{"attempts":5}}`)
	clk := newFakeClock()
	clk.cancel = true
	s := newScript(map[string][]Outcome{"config": {fail503}})
	_, _ = testRouter(clk, 0.5).Run(context.Background(), p, &Request{}, s)
	if len(s.calls) != 1 || len(clk.slept) != 1 {
		t.Fatalf("%d calls, %d sleeps after the client left", len(s.calls), len(clk.slept))
	}
}

func TestRetryBudgetFollowsContextDeadline(t *testing.T) {
	p := mustPlan(t, `{"provider":"openai","api_key":"k","retry":{"attempts":1,"use_retry_after_headers":true}}`)
	clk := newFakeClock()
	rt := testRouter(clk, 0)
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(time.Second))
	defer cancel()
	s := newScript(map[string][]Outcome{"config": {{Status: 503, RetryAfter: 2 * time.Second, HasRetryAfter: true}, ok200}})
	res, _ := rt.Run(ctx, p, &Request{}, s)
	if res.Status != 503 || len(s.calls) != 1 {
		t.Fatalf("a wait beyond the request deadline must not be made: %d after %d calls", res.Status, len(s.calls))
	}
}

func TestBackoffBounded(t *testing.T) {
	rt := NewRouter()
	for _, draw := range []float64{0, 0.5, 0.999999} {
		rt.Float = func() float64 { return draw }
		for n := 0; n < 70; n++ {
			bound := DefaultBackoffCap
			if n < 5 {
				bound = DefaultBackoffBase << n
			}
			got := rt.Backoff(n)
			want := time.Duration(draw * float64(bound))
			if got != want || got < 0 || got >= DefaultBackoffCap {
				t.Fatalf("Backoff(%d) with draw %v = %v, want %v (< cap %v)", n, draw, got, want, DefaultBackoffCap)
			}
		}
	}
}

func TestBreakersInRouting(t *testing.T) {
	lb := twoTargets(`{"mode":"loadbalance"}`)
	tests := []struct {
		name   string
		config string
		open   []string
		status int
		calls  string
		steps  string
		err    string
	}{
		{"fallback skips an open target", twoTargets(`{"mode":"fallback"}`), []string{t0}, 200, t1 + "#0", t0 + ":breaker_open " + t1 + ":ok", ""},
		{"loadbalance picks among closed targets", lb, []string{t0}, 200, t1 + "#0", t1 + ":ok", ""},
		{"single with an open target is a 503", twoTargets(`{"mode":"single"}`), []string{t0}, 503, "", t0 + ":breaker_open", t0},
		{"every target open is a 503 naming them", twoTargets(`{"mode":"fallback"}`), []string{t0, t1}, 503, "",
			t0 + ":breaker_open " + t1 + ":breaker_open", t0 + ", " + t1},
		{"loadbalance with all open is a 503 naming them", lb, []string{t0, t1}, 503, "",
			t0 + ":breaker_open " + t1 + ":breaker_open", t0 + ", " + t1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every target carries a cb_config; without one a target has
			// no breaker at all.
			cfg := strings.Replace(tt.config, `"targets":[`, `"cb_config":{"failure_threshold":1,"cooldown_interval":30000},"targets":[`, 1)
			p := mustPlan(t, cfg)
			rt := testRouter(newFakeClock(), 0)
			rt.Breakers = newFakeBreakers(tt.open...)
			s := newScript(nil)
			res, err := rt.Run(context.Background(), p, &Request{}, s)
			if tt.err != "" {
				e, ok := err.(*apierror.Error)
				if !ok || e.Status != 503 || e.Type != apierror.TypeUnavailable || !strings.Contains(e.Message, tt.err) {
					t.Fatalf("want a 503 naming %s, got %v", tt.err, err)
				}
			} else if err != nil || res.Status != tt.status {
				t.Fatalf("got %d %v", res.Status, err)
			}
			if strings.Join(s.calls, " ") != tt.calls || stepSummary(res.Steps) != tt.steps {
				t.Fatalf("calls [%s] steps [%s], want [%s] [%s]", strings.Join(s.calls, " "), stepSummary(res.Steps), tt.calls, tt.steps)
			}
		})
	}
}

func TestBreakerOpeningStopsRetries(t *testing.T) {
	p := mustPlan(t, `{"provider":"openai","api_key":"k","retry":{"attempts":5},"cb_config":{"failure_threshold":2,"cooldown_interval":30000}}`)
	br := newFakeBreakers()
	br.openAfter["config"] = 2
	rt := testRouter(newFakeClock(), 0)
	rt.Breakers = br
	s := newScript(map[string][]Outcome{"config": {fail503}})
	res, err := rt.Run(context.Background(), p, &Request{}, s)
	if err != nil || res.Status != 503 || len(s.calls) != 2 {
		t.Fatalf("status %d after %d calls (%v)", res.Status, len(s.calls), err)
	}
	if stepSummary(res.Steps) != "config:retry config:error" {
		t.Fatalf("steps %s", stepSummary(res.Steps))
	}
}

// TestCacheHitSkipsBreakerAndAttempts: a cached answer needs no healthy
// upstream, so it is served even while the target's breaker is open.
func TestCacheHitSkipsBreakerAndAttempts(t *testing.T) {
	p := mustPlan(t, strings.Replace(twoTargets(`{"mode":"fallback"}`), `"targets":[`, `"cb_config":{"failure_threshold":1,"cooldown_interval":30000},"targets":[`, 1))
	rt := testRouter(newFakeClock(), 0)
	rt.Breakers = newFakeBreakers(t1)
	s := newScript(map[string][]Outcome{t0: {fail500}})
	s.cached[t1] = true
	res, err := rt.Run(context.Background(), p, &Request{}, s)
	if err != nil || !res.Cached || res.Target.Path != t1 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if stepSummary(res.Steps) != t0+":fallback "+t1+":cache_hit" {
		t.Fatalf("steps %s", stepSummary(res.Steps))
	}
}

func TestLoadBalanceAllZeroIsBadRequest(t *testing.T) {
	_, err := resolveHeaders(t, "x-gateway-config", twoTargets(`{"mode":"loadbalance"}`,
		`{"provider":"openai","api_key":"a","weight":0}`, `{"provider":"openai","api_key":"b","weight":0}`))
	e, ok := err.(*apierror.Error)
	if !ok || e.Status != 400 || !strings.Contains(e.Message, "weight above 0") {
		t.Fatalf("want a 400 about weights, got %v", err)
	}
}

// BenchmarkRunFallbackHop measures the router's own cost for a request
// whose first target fails and whose second answers.
func BenchmarkRunFallbackHop(b *testing.B) {
	h := http.Header{}
	h.Set("x-gateway-config", twoTargets(`{"mode":"fallback"}`))
	in, _ := ingress.Parse(h)
	p, err := Resolve(in, testResolver, nil)
	if err != nil {
		b.Fatal(err)
	}
	rt := NewRouter()
	ex := benchExecutor{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rt.Run(context.Background(), p, &Request{}, ex); err != nil {
			b.Fatal(err)
		}
	}
}

type benchExecutor struct{}

func (benchExecutor) Cached(context.Context, *Target) (Outcome, bool) { return Outcome{}, false }

func (benchExecutor) Attempt(_ context.Context, t *Target, _ int) Outcome {
	if t.Path == t0 {
		return Outcome{Status: 503}
	}
	return Outcome{Status: 200, Committed: true}
}
