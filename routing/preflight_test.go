package routing

import (
	"context"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestUnfitTargets: a target the request does not fit (token preflight)
// is passed over by every strategy without an attempt; when no target
// fits, the answer is a 400 context_length_exceeded, unless a breaker
// is open somewhere (the request may fit there later: 503).
func TestUnfitTargets(t *testing.T) {
	tests := []struct {
		name     string
		strategy string
		unfit    []string // target paths the request does not fit
		open     []string // targets whose breaker is open
		float    float64
		calls    string
		steps    string
		status   int // 0: no routing error
	}{
		{"fallback moves on", `{"mode":"fallback"}`, []string{"config.targets[0]"}, nil, 0,
			"config.targets[1]#0", "config.targets[0]:context_window_exceeded config.targets[1]:ok", 0},
		{"loadbalance picks the other", `{"mode":"loadbalance"}`, []string{"config.targets[0]"}, nil, 0,
			"config.targets[1]#0", "config.targets[1]:ok", 0},
		{"loadbalance other way", `{"mode":"loadbalance"}`, []string{"config.targets[1]"}, nil, 0.99,
			"config.targets[0]#0", "config.targets[0]:ok", 0},
		{"least_latency", `{"mode":"loadbalance","loadbalance":"least_latency"}`, []string{"config.targets[0]"}, nil, 0,
			"config.targets[1]#0", "config.targets[1]:ok", 0},
		{"none fits", `{"mode":"fallback"}`, []string{"config.targets[0]", "config.targets[1]"}, nil, 0,
			"", "config.targets[0]:context_window_exceeded config.targets[1]:context_window_exceeded", 400},
		{"none fits, loadbalance", `{"mode":"loadbalance"}`, []string{"config.targets[0]", "config.targets[1]"}, nil, 0,
			"", "config.targets[0]:context_window_exceeded config.targets[1]:context_window_exceeded", 400},
		{"unfit and open", `{"mode":"fallback"}`, []string{"config.targets[0]"}, []string{"config.targets[1]"}, 0,
			"", "config.targets[0]:context_window_exceeded config.targets[1]:breaker_open", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb := `{"provider":"openai","api_key":"ka","cb_config":{"failure_threshold":1,"cooldown_interval":60000}}`
			p := mustPlan(t, twoTargets(tt.strategy, cb, strings.Replace(cb, "ka", "kb", 1)))
			for _, l := range p.Leaves {
				for _, u := range tt.unfit {
					if l.Path == u {
						l.Unfit = &Unfit{Model: "gpt-4o", Tokens: 150000, Window: 128000}
					}
				}
			}
			clk := newFakeClock()
			rt := testRouter(clk, tt.float)
			rt.Breakers = newFakeBreakers(tt.open...)
			rt.Loads = NewLoadStats(clk.Now)
			s := newScript(nil)
			res, err := rt.Run(context.Background(), p, &Request{}, s)
			if got := strings.Join(s.calls, " "); got != tt.calls {
				t.Errorf("calls %q, want %q", got, tt.calls)
			}
			if got := stepSummary(res.Steps); got != tt.steps {
				t.Errorf("steps %q, want %q", got, tt.steps)
			}
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			e := apierror.As(err)
			if e.Status != tt.status {
				t.Fatalf("error %v, want status %d", err, tt.status)
			}
			if tt.status == 400 {
				if e.Code != "context_length_exceeded" || res.ErrorType != providers.ErrContextLength ||
					!strings.Contains(e.Message, "at least 150000 tokens") || !strings.Contains(e.Message, "config.targets[1] (gpt-4o: 128000)") {
					t.Errorf("error %+v, class %q", e, res.ErrorType)
				}
			}
		})
	}
}
