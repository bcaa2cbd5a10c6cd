package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestKeyDefaultsRouteReserves: a request that names no route, routed by
// its key's defaults (a default virtual key or config), is described and
// priced by that route, as llm_gateway routes it: on a budget and on a
// cost policy smaller than one request's estimate, a second request
// admitted while the first is unsettled is refused, exactly as when the
// route is in headers. Before, the defaults were invisible to
// llm_ratelimit, the provider unknown, the price unknown and the
// reservation nothing, so every concurrent request passed.
func TestKeyDefaultsRouteReserves(t *testing.T) {
	routes := []struct {
		name    string
		id      *identity.Caller
		headers []string
	}{
		{"provider header", testAlice, []string{"X-Gateway-Provider", "openai"}},
		{"virtual key header", testAlice, []string{"X-Gateway-Virtual-Key", "vk-openai"}},
		{"key default virtual key", withDefaults(testAlice, identity.Defaults{VirtualKey: "vk-openai"}), nil},
		{"key default config", withDefaults(testAlice, identity.Defaults{ConfigID: "cfg-1"}), nil},
	}
	stages := []struct {
		name  string
		admit func(t *testing.T, h *Handler, s *BudgetStage, r *http.Request, id *identity.Caller) int
	}{
		{"budget through llm_ratelimit", func(t *testing.T, h *Handler, _ *BudgetStage, r *http.Request, _ *identity.Caller) int {
			w := httptest.NewRecorder()
			next := &nextHandler{}
			if err := h.ServeHTTP(w, r, next); err != nil {
				t.Fatal(err)
			}
			if next.called {
				return http.StatusOK
			}
			return w.Code
		}},
		{"budget stage of llm_gateway", func(t *testing.T, _ *Handler, s *BudgetStage, r *http.Request, id *identity.Caller) int {
			if _, err := s.AdmitBudget(http.Header{}, r, id, []byte(chatBody)); err != nil {
				return apierror.As(err).Status
			}
			return http.StatusOK
		}},
		{"cost policy", func(t *testing.T, h *Handler, _ *BudgetStage, r *http.Request, _ *identity.Caller) int {
			w := httptest.NewRecorder()
			next := &nextHandler{}
			if err := h.ServeHTTP(w, r, next); err != nil {
				t.Fatal(err)
			}
			if next.called {
				return http.StatusOK
			}
			return w.Code
		}},
	}
	for _, st := range stages {
		for _, rt := range routes {
			t.Run(st.name+"/"+rt.name, func(t *testing.T) {
				ctl := budgetControl{fakeControl: newControl()}
				ctl.vks["vk-openai"] = &providers.Settings{Provider: "openai"}
				ctl.keys["key-alice"] = rt.id
				// 10 micro-dollars: less than one request's estimate
				// (50 output tokens of gpt-4o), more than nothing.
				var limits limitSource
				want := http.StatusPreconditionFailed
				if st.name == "cost policy" {
					addPolicy(t, ctl.fakeControl, policies.TypeCost, policies.UnitRPD, 0.00001, cond("api_key", "*"), "api_key")
					want = http.StatusTooManyRequests
				} else {
					limits = limitSource{dollarLimit(t, 0.00001)}
				}
				ctl.e = budgets.NewEnforcer(ctl.limiter, limits, nil, nil)
				ctl.e.MaxWait = 0
				h := newHandler(t, ctl)
				s := &BudgetStage{h: *newHandler(t, ctl)}
				var got [2]int
				for i := range got {
					r := newRequest("key-alice", []byte(chatBody), rt.headers...)
					got[i] = st.admit(t, h, s, r, rt.id)
				}
				if got != [2]int{http.StatusOK, want} {
					t.Fatalf("two unsettled requests on a budget below one estimate: %v, want [200 %d]", got, want)
				}
			})
		}
	}
}

// withDefaults returns a copy of id whose key has defaults d.
func withDefaults(id *identity.Caller, d identity.Defaults) *identity.Caller {
	c := *id
	c.Defaults = &d
	return &c
}

// TestApplyDefaultsMetadata: a key's default metadata is under the
// request's own, so a policy grouped by it sees the default.
func TestApplyDefaultsMetadata(t *testing.T) {
	ctl := newControl()
	ctl.keys["key-alice"] = withDefaults(testAlice, identity.Defaults{Metadata: map[string]string{"team": "red"}})
	p := addPolicy(t, ctl, policies.TypeRequests, policies.UnitRPM, 1, cond("metadata.team", "red"), "metadata.team")
	h := newHandler(t, ctl)
	for i, want := range []bool{true, false} {
		next := &nextHandler{}
		if err := h.ServeHTTP(httptest.NewRecorder(), newRequest("key-alice", []byte(chatBody)), next); err != nil {
			t.Fatal(err)
		}
		if next.called != want {
			t.Fatalf("request %d admitted %v, want %v (policy %s on the key's default metadata)", i, next.called, want, p.ID)
		}
	}
	_ = context.Background()
}
