package console

import (
	"strings"
	"testing"
)

// TestSpendLevel: a group is over its limit when nothing is left, near
// it from 80 % spent.
func TestSpendLevel(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		limit, used, remaining float64
		status                 string
		level, percent         string
	}{
		{"quarter spent", 10, 2.5, 7.5, "active", "", "25%"},
		{"just under near", 10, 7.99, 2.01, "active", "", "79%"},
		{"at 80 %", 10, 8, 2, "active", "near", "80%"},
		{"past the limit", 10, 10.4, 0, "exhausted", "over", "104%"},
		{"nothing left, not yet marked", 10, 10, 0, "active", "over", "100%"},
		{"a zero limit", 0, 0, 0, "exhausted", "over", "100%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &spendRow{CreditLimit: tc.limit, Used: tc.used, Remaining: tc.remaining, Status: tc.status}
			if got := s.Level(); got != tc.level {
				t.Errorf("level %q, want %q", got, tc.level)
			}
			if got := s.Percent(); got != tc.percent {
				t.Errorf("percent %q, want %q", got, tc.percent)
			}
		})
	}
}

// TestBudgetsViewFlags: the administrator's view flags each group over
// or near its limit, counts them, and keeps the API's order (closest to
// the limit first).
func TestBudgetsViewFlags(t *testing.T) {
	h, _, id, _ := scriptedConsole(t, with(map[string]scripted{"GET /v1/policies/usage-limits/usage": {200, `{"object":"list","total":3,"data":[` +
		`{"policy_id":"b1","name":"team","type":"cost","group":{"api_key":"bob"},"credit_limit":5,"used":5.5,"remaining":0,"status":"exhausted"},` +
		`{"policy_id":"b1","name":"team","type":"cost","group":{"user":"ada@example.com"},"credit_limit":5,"used":4.5,"remaining":0.5,"status":"active"},` +
		`{"policy_id":"b1","name":"team","type":"cost","group":{"api_key":"eve"},"credit_limit":5,"used":1,"remaining":4,"status":"active"}],"per_request":[]}`}}))
	body := serve(h, "GET", "/budgets", nil, id).Body.String()
	rows := []string{
		`<tr data-policy="team" data-group="api_key=bob" class="exhausted">`,
		`<tr data-policy="team" data-group="user=ada@example.com" class="near">`,
		`<tr data-policy="team" data-group="api_key=eve">`,
	}
	last := -1
	for _, r := range rows {
		i := strings.Index(body, r)
		if i < 0 || i < last {
			t.Fatalf("row %s missing or out of order:\n%s", r, body)
		}
		last = i
	}
	for _, want := range []string{`<span class="flag over">1 over</span>`, `<span class="flag near">1 near (≥ 80 %)</span>`, `<span class="percent">90%</span> <span class="flag near">near</span>`, `value="0.9"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the view lacks %s", want)
		}
	}
}
