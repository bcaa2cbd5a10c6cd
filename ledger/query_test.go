package ledger

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestLogsQueriesUseIndexes: every query the logs API makes (its page,
// newest first, and its capped count) finds its records through the
// index its scope needs, names compared as dictionary ids, with no scan
// of the records and no sort of them: SQLite's EXPLAIN QUERY PLAN over a
// ledger with records in it. The indexes are exactly these
// (TestLedgerIndexes), so one dropped or changed fails here.
func TestLogsQueriesUseIndexes(t *testing.T) {
	db := openTest(t, stores[0].dsn(t))
	var recs []Record
	for i := 0; i < 200; i++ {
		recs = append(recs, rec([]string{"ws-a", "ws-b"}[i%2], time.Duration(i)*time.Second, "gpt-4o", 200, 1))
	}
	if err := db.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	from, to := t0, t0.Add(time.Hour)
	for _, c := range []struct {
		name  string
		f     Filter
		index string
	}{
		{"organisation", Filter{Organisation: "org"}, "llm_ledger_org_ts"},
		{"organisation and time", Filter{Organisation: "org", From: from, To: to}, "llm_ledger_org_ts"},
		{"workspace", Filter{Workspace: "ws-a", Organisation: "org"}, "llm_ledger_ws_org_ts"},
		{"workspace and time", Filter{Workspace: "ws-a", Organisation: "org", From: from, To: to}, "llm_ledger_ws_org_ts"},
		{"workspace and model", Filter{Workspace: "ws-a", Organisation: "org", Models: []string{"gpt-4o"}}, "llm_ledger_ws_org_ts"},
		{"one key", Filter{Organisation: "org", APIKeys: []string{"key-ws-a"}}, "llm_ledger_org_key_ts"},
		{"one key and time", Filter{Organisation: "org", APIKeys: []string{"key-ws-a"}, From: from, To: to}, "llm_ledger_org_key_ts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			where, args, err := db.where(&c.f)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []struct {
				kind, sql string
				args      []any
			}{
				{"page", logsPageSQL(where), append(append([]any{}, args...), 50, 0)},
				{"count", logsCountSQL(where), append(append([]any{}, args...), MaxLogsTotal+1)},
			} {
				plan := queryPlan(t, db, q.sql, q.args...)
				records := recordsSteps(plan)
				if len(records) != 1 || !strings.Contains(records[0], "INDEX "+c.index+" (") {
					t.Errorf("%s reads the records by\n%s\nwant %s; the plan:\n%s", q.kind, strings.Join(records, "\n"), c.index, plan)
				}
				if q.kind == "page" && strings.Contains(plan, "TEMP B-TREE") {
					t.Errorf("the page sorts its records:\n%s", plan)
				}
			}
		})
	}
	// A trace reads its two partial indexes, then each record by id.
	where, args, err := db.where(&Filter{Organisation: "org", TraceID: "trace-ws-a-0s"})
	if err != nil {
		t.Fatal(err)
	}
	plan := queryPlan(t, db, logsPageSQL(where), append(args, 50, 0)...)
	for _, want := range []string{"INDEX llm_ledger_trace_made", "INDEX llm_ledger_trace_sent", "INTEGER PRIMARY KEY"} {
		if !strings.Contains(plan, want) {
			t.Errorf("a trace's page does not use %s:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "SCAN llm_ledger") && !strings.Contains(plan, "SCAN llm_ledger USING") {
		t.Errorf("a trace's page scans the records:\n%s", plan)
	}
}

// recordsSteps are the steps of a plan that read the records table
// itself (not the dictionary).
func recordsSteps(plan string) []string {
	var out []string
	for _, l := range strings.Split(plan, "\n") {
		if strings.Contains(l, "llm_ledger ") && !strings.Contains(l, "llm_ledger_dim") || strings.HasSuffix(l, "llm_ledger") {
			out = append(out, l)
		}
	}
	return out
}
