package console

import (
	"net/url"
	"strings"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
)

// TestBudgetsSpendByScope: a key that may read budgets (usage_limits.read,
// or every scope) sees every group's spend on the budgets page, in the
// API's order, from GET /v1/policies/usage-limits/usage; a key that may
// only list them keeps its own spend (from /v1/usage/me) and the console
// never asks the API for the others'.
func TestBudgetsSpendByScope(t *testing.T) {
	const (
		readerKey = "gw-budget-reader-0123456789"
		listerKey = "gw-budget-lister-0123456789"
	)
	for _, tc := range []struct {
		name      string
		key       string
		scopes    []string
		seesSpend bool
	}{
		{"admin sees every key's spend", "gw-all-scopes-0123456789", []string{"*"}, true},
		{"a budget reader sees every key's spend", readerKey, []string{"usage_limits.read"}, true},
		{"the usage_limits wildcard reads budgets", "gw-budget-star-0123456789", []string{"usage_limits.*"}, true},
		{"a key that may only list budgets sees its own spend", listerKey, []string{"usage_limits.list"}, false},
		{"a key without budget scopes sees its own spend", "gw-plain-0123456789", []string{"completions.write"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, f, _ := newConsole(t)
			h.auth = func(k string) (*identity.Caller, bool) {
				return &identity.Caller{Name: "me", Scopes: tc.scopes}, k == tc.key
			}
			sid, _ := signIn(t, h, tc.key)
			w := serve(h, "GET", "/budgets?offset=50", nil, sid)
			body := w.Body.String()
			if w.Code != 200 {
				t.Fatalf("budgets page: %d %s", w.Code, body)
			}
			f.mu.Lock()
			calls, queries := append([]string(nil), f.calls...), append([]string(nil), f.queries...)
			f.mu.Unlock()
			asked := -1
			for i, c := range calls {
				if c == "GET /v1/policies/usage-limits/usage" {
					asked = i
				}
			}
			// Its own spend, as before, either way.
			if !strings.Contains(body, `<td class="used">1.25</td>`) {
				t.Errorf("the key's own spend is not shown")
			}
			if !tc.seesSpend {
				if asked >= 0 || strings.Contains(body, `id="spend"`) || strings.Contains(body, "team-b") {
					t.Fatalf("a key that may not read budgets was shown (or the console asked for) every key's spend: %v", calls)
				}
				return
			}
			if asked < 0 {
				t.Fatalf("the console did not ask for the spend report: %v", calls)
			}
			if q, _ := url.ParseQuery(queries[asked]); q.Get("limit") != "50" || q.Get("offset") != "50" {
				t.Errorf("spend report asked with %q, want limit=50 offset=50", queries[asked])
			}
			exhausted := strings.Index(body, `<tr data-policy="team" data-group="api_key=team-b" class="exhausted">`)
			active := strings.Index(body, `<tr data-policy="key spending limit" data-group="api_key=team-a">`)
			if exhausted < 0 || active < 0 || exhausted > active {
				t.Fatalf("the spend table lacks a group or changed the API's order (exhausted at %d, active at %d):\n%s", exhausted, active, body)
			}
			for _, want := range []string{`<td class="used">5.5</td><td class="remaining">0</td>`, `<td class="remaining">3.75</td>`,
				`id="per-request"`, "per model", `id="spend-prev"`, "monthly, resets 2026-02-01 00:00:00Z"} {
				if !strings.Contains(body, want) {
					t.Errorf("the spend table lacks %q", want)
				}
			}
		})
	}
}
