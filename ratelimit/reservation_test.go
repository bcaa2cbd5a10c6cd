package ratelimit

import (
	"time"

	"context"
	"github.com/caddyserver/caddy/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// pricedControl is a fakeControl with the built-in price catalog, as the
// llm app offers it to spend limits.
type pricedControl struct {
	*fakeControl
	prices *cost.Catalog
}

func (p pricedControl) Prices() *cost.Catalog { return p.prices }

func TestDefaultReservation(t *testing.T) {
	open := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	bounded := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`
	prompt := func(b string) int64 { return (int64(len(b)) + bytesPerToken - 1) / bytesPerToken }
	tests := []struct {
		name     string
		path     string
		body     string
		policy   int64 // default_reservation
		handler  int64 // default_output_tokens
		wantTok  int64
		wantCost bool // a cost reservation is expected (priced model)
	}{
		{"open chat reserves the default", "/v1/chat/completions", open, 0, 0, prompt(open) + DefaultOutputTokens, true},
		{"the policy's default wins", "/v1/chat/completions", open, 300, 2000, prompt(open) + 300, true},
		{"the handler's default", "/v1/chat/completions", open, 0, 2000, prompt(open) + 2000, true},
		{"the client's bound wins", "/v1/chat/completions", bounded, 300, 2000, prompt(bounded) + 50, true},
		{"responses", "/v1/responses", open, 0, 0, prompt(open) + DefaultOutputTokens, true},
		{"embeddings generate nothing", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`, 0, 0,
			prompt(`{"model":"text-embedding-3-small","input":"hi"}`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctl := newControl()
			tok := addPolicy(t, ctl, policies.TypeTokens, policies.UnitRPM, 1e6, cond("api_key", "*"), "api_key")
			tok.DefaultReservation = tt.policy
			h := newHandler(t, pricedControl{ctl, cost.Builtin()})
			h.DefaultOutputTokens = tt.handler
			r := newRequest("key-alice", []byte(tt.body), "X-Gateway-Provider", "openai")
			r.URL.Path = tt.path
			q := request{r: r, h: h, body: []byte(tt.body), size: int64(len(tt.body)), bodyDone: true}
			q.attrs.Model = "gpt-4o"
			q.attrs.Pending = policies.PendingRouting
			if got := h.reserveTokens(&q, tok); got != tt.wantTok {
				t.Errorf("tokens reserved %d, want %d", got, tt.wantTok)
			}
			spend := &policies.Policy{Type: policies.TypeCost, DefaultReservation: tt.policy}
			price, _ := cost.Builtin().Price("openai", "gpt-4o")
			want := microUSD(price.Estimate(prompt(tt.body), tt.wantTok-prompt(tt.body)))
			if got := h.reserveSpend(&q, spend); got != want {
				t.Errorf("micro-dollars reserved %d, want %d", got, want)
			}
		})
	}
}

// TestSpendAcrossInstances sends 100 concurrent chat requests without
// max_tokens through three handlers, each with its own Redis limiter on
// one Redis (three gateway instances), against a cost policy. Every
// request is admitted or refused before any answer settles (the worst
// case: one wave). Each answer costs about US$0.002 on gpt-4o (200 output
// tokens). Spend must stay within the budget plus one answer per instance,
// and a budget far from spent must refuse nothing. Before the default
// reservation, the prompt alone was reserved: all 100 passed a US$0.05
// budget and spent about US$0.21.
func TestSpendAcrossInstances(t *testing.T) {
	redistest.Require(t)
	usage := providers.Usage{PromptTokens: 20, CompletionTokens: 200, TotalTokens: 220}
	answer, _ := cost.Builtin().Cost("openai", "gpt-4o", usage)
	tests := []struct {
		name         string
		budget       float64
		wantAdmitAll bool
	}{
		{"tight budget", 0.05, false},
		{"budget far from spent", 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := "llmgw:test:ratelimit:" + uuid.NewString() + ":"
			store := policies.NewMemoryStore(policies.StoreConfig{})
			var handlers []*Handler
			for range 3 {
				c := redistest.Client(t, 0)
				ctl := newControl()
				ctl.store = store
				ctl.limiter = policies.NewRedisLimiter(c, policies.WithKeyPrefix(prefix))
				handlers = append(handlers, newHandler(t, pricedControl{ctl, cost.Builtin()}))
			}
			t.Cleanup(func() {
				c := redistest.Client(t, 0)
				ctx := context.Background()
				for it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator(); it.Next(ctx); {
					c.Del(ctx, it.Val())
				}
			})
			p := &policies.Policy{Type: policies.TypeCost, Unit: policies.UnitRPH, Value: tt.budget,
				Conditions: cond("api_key", "*"), GroupBy: []policies.GroupBy{{Key: "api_key"}},
				WorkspaceID: testWS, OrganisationID: testOrg}
			if err := store.Create(context.Background(), p); err != nil {
				t.Fatal(err)
			}

			const n = 100
			var decided sync.WaitGroup
			decided.Add(n)
			wave := make(chan struct{}) // closed once every request was decided
			go func() { decided.Wait(); close(wave) }()
			var admitted atomic.Int64
			var spentMicro atomic.Int64
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`
					r := newRequest("key-alice", []byte(body), "X-Gateway-Provider", "openai")
					next := nextFunc(func(w http.ResponseWriter, r *http.Request) error {
						admitted.Add(1)
						decided.Done()
						<-wave
						usd, known := cost.Builtin().Cost("openai", "gpt-4o", usage)
						spentMicro.Add(microUSD(usd))
						observe.RunDone(r, &observe.Entry{Status: 200, Usage: &usage, CostUSD: usd, CostKnown: known})
						return nil
					})
					called := false
					err := handlers[i%3].ServeHTTP(httptest.NewRecorder(), r, nextFunc(func(w http.ResponseWriter, r *http.Request) error {
						called = true
						return next(w, r)
					}))
					if err != nil {
						t.Error(err)
					}
					if !called {
						decided.Done()
					}
				})
			}
			wg.Wait()
			spent := float64(spentMicro.Load()) / policies.MicroUSD
			t.Logf("budget US$%g, 100 concurrent requests over 3 instances: %d admitted, US$%.4f spent (answer US$%.4f)",
				tt.budget, admitted.Load(), spent, answer)
			if spent > tt.budget+3*answer {
				t.Fatalf("spent US$%.4f against a budget of US$%g: more than 3 answers (US$%.4f) over", spent, tt.budget, 3*answer)
			}
			if tt.wantAdmitAll && admitted.Load() != n {
				t.Fatalf("%d of %d admitted with the budget far from spent", admitted.Load(), n)
			}
			if admitted.Load() == 0 {
				t.Fatal("nothing admitted")
			}
		})
	}
}

// nextFunc adapts a function to caddyhttp.Handler.
type nextFunc func(http.ResponseWriter, *http.Request) error

func (f nextFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) error { return f(w, r) }

// TestUnsettledReservationComesBackAfterLease: a tokens policy's
// reservation whose request never settles (its instance died) is given
// back once the reservation lease has run out, not when it leaves the
// policy's day-long window; a reservation settled in time is charged its
// usage, which its lease then leaves alone. Over Redis (whose server
// clock leases follow, so the test waits) and in memory.
func TestUnsettledReservationComesBackAfterLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	reserved := estimateTokens([]byte(chatBody), int64(len(chatBody)))
	limit := reserved * 3 / 2 // room for one reservation and a half
	kinds := []struct {
		name string
		make func(t *testing.T) policies.Limiter
	}{
		{"memory", func(t *testing.T) policies.Limiter { return policies.NewMemoryLimiter() }},
		{"redis", func(t *testing.T) policies.Limiter {
			return policies.NewRedisLimiter(redistest.Client(t, 0), policies.WithKeyPrefix("llmgw-test-lease:"+uuid.NewString()+":"))
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctl := newControl()
			ctl.limiter = k.make(t)
			tok := addPolicy(t, ctl, policies.TypeTokens, policies.UnitRPD, float64(limit), cond("api_key", "*"), "api_key")
			h := newHandler(t, ctl)
			h.ReservationLease = caddy.Duration(lease)
			key := tok.GroupKey(&policies.Attributes{WorkspaceID: testWS, APIKey: "alice"})
			serve := func() (*http.Request, int) {
				rec := httptest.NewRecorder()
				r := newRequest("key-alice", []byte(chatBody))
				if err := h.ServeHTTP(rec, r, &nextHandler{}); err != nil {
					t.Fatal(err)
				}
				return r, rec.Code
			}
			if _, code := serve(); code != http.StatusOK {
				t.Fatalf("first request: %d", code)
			}
			// Never settled: it holds its reservation for the lease.
			if _, code := serve(); code != http.StatusTooManyRequests {
				t.Fatalf("second request within the lease: %d, want 429", code)
			}
			time.Sleep(lease + 100*time.Millisecond)
			r, code := serve()
			if code != http.StatusOK {
				t.Fatalf("request after the lease ran out: %d, want 200 (the dead reservation given back)", code)
			}
			// This one settles in time, having used 10 tokens.
			observe.RunDone(r, &observe.Entry{Status: 200, Usage: &providers.Usage{PromptTokens: 6, CompletionTokens: 4, TotalTokens: 10}})
			time.Sleep(lease + 100*time.Millisecond)
			if got := remaining(t, ctl.limiter, tok, key); got != limit-10 {
				t.Fatalf("remaining %d after its lease ran out, want %d (its 10 tokens, charged once)", got, limit-10)
			}
		})
	}
}

// TestLeasedWindows: reservations are held under a lease only on windows
// at least four leases long: hourly and daily with the default lease, a
// per-minute window too with a lease of 15 s or less.
func TestLeasedWindows(t *testing.T) {
	tests := []struct {
		lease  time.Duration
		window time.Duration
		want   bool
	}{
		{0, time.Minute, false},
		{0, time.Hour, true},
		{0, 24 * time.Hour, true},
		{15 * time.Second, time.Minute, true},
		{16 * time.Second, time.Minute, false},
		{time.Hour, time.Hour, false},
	}
	for _, tt := range tests {
		h := &Handler{ReservationLease: caddy.Duration(tt.lease)}
		if got := h.leased(tt.window); got != tt.want {
			t.Errorf("lease %v, window %v: leased %v, want %v", tt.lease, tt.window, got, tt.want)
		}
	}
}
