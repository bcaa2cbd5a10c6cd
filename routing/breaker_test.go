package routing

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

func cbTarget(key string, cb *CBConfig) *Target {
	return &Target{Path: "config", Settings: providers.Settings{Provider: "openai", APIKey: key}, CB: cb}
}

var cb3 = &CBConfig{FailureThreshold: 3, CooldownInterval: 30000}

// report runs one attempt through the breaker, if it allows one.
func report(s *BreakerSet, t *Target, o Outcome) bool {
	done, ok := s.Allow(t)
	if ok {
		done(o)
	}
	return ok
}

func TestBreakerLifecycle(t *testing.T) {
	clk := newFakeClock()
	core, logs := observer.New(zap.InfoLevel)
	s := NewBreakerSet(clk.Now, zap.New(core))
	tg := cbTarget("sk-secret-1", cb3)

	steps := []struct {
		do      string // "fail", "ok", "advance <dur>", "check"
		allowed bool   // for fail/ok: whether Allow let it through
		state   string // state afterwards
	}{
		{"fail", true, "closed"},
		{"fail", true, "closed"},
		{"ok", true, "closed"}, // a success resets the consecutive count
		{"fail", true, "closed"},
		{"fail", true, "closed"},
		{"fail", true, "open"}, // third consecutive failure
		{"fail", false, "open"},
		{"advance 29999ms", false, "open"},
		{"fail", false, "open"},
		{"advance 1ms", false, "half-open"},
		{"fail", true, "open"}, // the half-open trial failed: a new cooldown
		{"advance 29999ms", false, "open"},
		{"advance 1ms", false, "half-open"},
		{"ok", true, "closed"}, // the trial succeeded
		{"fail", true, "closed"},
	}
	for i, st := range steps {
		switch {
		case strings.HasPrefix(st.do, "advance "):
			d, _ := time.ParseDuration(strings.TrimPrefix(st.do, "advance "))
			clk.t = clk.t.Add(d)
		case st.do == "fail" || st.do == "ok":
			o := Outcome{Status: 503}
			if st.do == "ok" {
				o = Outcome{Status: 200, Committed: true}
			}
			if got := report(s, tg, o); got != st.allowed {
				t.Fatalf("step %d (%s): allowed=%v, want %v", i, st.do, got, st.allowed)
			}
		}
		if got := s.State(tg); got != st.state {
			t.Fatalf("step %d (%s): state %s, want %s", i, st.do, got, st.state)
		}
		if open := s.Open(tg); open != (st.state == "open") {
			t.Fatalf("step %d: Open()=%v in state %s", i, open, st.state)
		}
	}
	var changes []string
	for _, e := range logs.FilterMessage("circuit breaker state changed").All() {
		m := e.ContextMap()
		changes = append(changes, m["from"].(string)+"->"+m["to"].(string))
		for _, v := range m {
			if s, ok := v.(string); ok && strings.Contains(s, "sk-secret") {
				t.Fatal("the breaker log leaks the provider key")
			}
		}
	}
	want := "closed->open open->half-open half-open->open open->half-open half-open->closed"
	if strings.Join(changes, " ") != want {
		t.Fatalf("state changes logged: %v\nwant %s", changes, want)
	}
}

func TestBreakerHalfOpenAllowsOneTrial(t *testing.T) {
	clk := newFakeClock()
	s := NewBreakerSet(clk.Now, nil)
	tg := cbTarget("k", &CBConfig{FailureThreshold: 1, CooldownInterval: 30000})
	report(s, tg, Outcome{Status: 500})
	clk.t = clk.t.Add(30 * time.Second)
	done, ok := s.Allow(tg)
	if !ok {
		t.Fatal("the half-open trial was refused")
	}
	if _, ok := s.Allow(tg); ok {
		t.Fatal("a second request went through while the trial is in flight")
	}
	done(Outcome{Status: 200, Committed: true})
	if _, ok := s.Allow(tg); !ok {
		t.Fatal("closed after a good trial, yet refused")
	}
}

func TestBreakerClassification(t *testing.T) {
	tests := []struct {
		name  string
		codes []int
		o     Outcome
		trips bool
	}{
		{"5xx fails by default", nil, Outcome{Status: 502}, true},
		{"429 fails by default", nil, Outcome{Status: 429}, true},
		{"4xx succeeds by default", nil, Outcome{Status: 400}, false},
		{"timeout fails", nil, Outcome{Status: 408, Cause: CauseTimeout}, true},
		{"unreachable fails", []int{418}, Outcome{Status: 502, Cause: CauseUnreachable}, true},
		{"a gateway refusal is not counted", nil, Outcome{Status: 502, Cause: CauseLocal}, false},
		{"a client leaving is not counted", nil, Outcome{Status: 499, Committed: true, Cause: CauseClientGone}, false},
		{"a committed stream succeeds", nil, Outcome{Status: 200, Committed: true, Cause: CauseStreamFailed}, false},
		{"custom codes replace the default", []int{400}, Outcome{Status: 400}, true},
		{"custom codes: 5xx then passes", []int{400}, Outcome{Status: 503}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewBreakerSet(newFakeClock().Now, nil)
			tg := cbTarget("k", &CBConfig{FailureThreshold: 1, CooldownInterval: 30000, FailureStatusCodes: tt.codes})
			report(s, tg, tt.o)
			if s.Open(tg) != tt.trips {
				t.Fatalf("open=%v, want %v", s.Open(tg), tt.trips)
			}
		})
	}
}

func TestBreakerKeys(t *testing.T) {
	s := NewBreakerSet(newFakeClock().Now, nil)
	a := cbTarget("key-a", &CBConfig{FailureThreshold: 1, CooldownInterval: 30000})
	report(s, a, Outcome{Status: 500})
	tests := []struct {
		name   string
		target *Target
		shared bool
	}{
		{"same provider, host, key and settings", cbTarget("key-a", &CBConfig{FailureThreshold: 1, CooldownInterval: 30000}), true},
		{"another key", cbTarget("key-b", &CBConfig{FailureThreshold: 1, CooldownInterval: 30000}), false},
		{"other settings", cbTarget("key-a", &CBConfig{FailureThreshold: 2, CooldownInterval: 30000}), false},
		{"another host", func() *Target {
			t := cbTarget("key-a", &CBConfig{FailureThreshold: 1, CooldownInterval: 30000})
			t.Settings.CustomHost = "http://other"
			return t
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s.Open(tt.target) != tt.shared {
				t.Fatalf("shares the open breaker: %v, want %v", s.Open(tt.target), tt.shared)
			}
		})
	}
	if strings.Contains(breakerKey(a), "key-a") {
		t.Fatalf("the breaker key holds the raw credential: %s", breakerKey(a))
	}
}

func TestBreakerIdleEviction(t *testing.T) {
	clk := newFakeClock()
	s := NewBreakerSet(clk.Now, nil)
	idle := cbTarget("idle", cb3)
	opened := cbTarget("opened", &CBConfig{FailureThreshold: 1, CooldownInterval: 3 * 3600e3})
	report(s, idle, Outcome{Status: 200, Committed: true})
	report(s, opened, Outcome{Status: 500})
	clk.t = clk.t.Add(BreakerIdleTTL + time.Minute)
	report(s, cbTarget("new", cb3), Outcome{Status: 200, Committed: true})
	if s.Len() != 2 || !s.Open(opened) {
		t.Fatalf("after the sweep %d breakers remain (want the open one and the new one); open=%v", s.Len(), s.Open(opened))
	}
}

// TestBreakerConcurrent gives the race detector concurrent use of shared
// and distinct breakers.
func TestBreakerConcurrent(t *testing.T) {
	s := NewBreakerSet(time.Now, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for j := range 300 {
				tg := cbTarget("k"+strconv.Itoa((g+j)%5), cb3)
				status := 200
				if j%3 == 0 {
					status = 500
				}
				if done, ok := s.Allow(tg); ok {
					done(Outcome{Status: status, Committed: status == 200})
				}
				_ = s.Open(tg)
				_ = s.State(tg)
			}
		})
	}
	wg.Wait()
	if s.Len() != 5 {
		t.Fatalf("%d breakers for 5 keys", s.Len())
	}
}
