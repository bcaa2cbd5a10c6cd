package ledger

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSweepEveryOrganisation: the retention sweep, which finds expired
// records organisation by organisation (no index on time alone), deletes
// every organisation's expired records, the empty organisation's too, and
// keeps every later one.
func TestSweepEveryOrganisation(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			orgs := []string{"", "org-a", "org-b", "org-c"}
			var recs []Record
			for i, org := range orgs {
				for _, at := range []time.Duration{0, 30 * time.Minute, 2 * time.Hour} {
					r := rec("ws-"+org, at+time.Duration(i)*time.Second, "m", 200, 1)
					r.Organisation = org
					recs = append(recs, r)
				}
			}
			if err := db.Insert(ctx, recs); err != nil {
				t.Fatal(err)
			}
			// t0 is on the hour: the two records of its first hour of each
			// organisation are expired.
			n, err := db.Sweep(ctx, t0.Add(time.Hour+time.Minute))
			if err != nil || n != int64(2*len(orgs)) {
				t.Fatalf("swept %d (%v), want %d", n, err, 2*len(orgs))
			}
			for _, org := range orgs {
				got, total, _, err := db.Logs(ctx, &Filter{Workspace: "ws-" + org}, 10, 0)
				if err != nil || total != 1 || got[0].Time.Before(t0.Add(2*time.Hour)) {
					t.Errorf("organisation %q keeps %d records (%v), want only the one 2h after t0", org, total, err)
				}
			}
			var rolled int64
			if err := db.db.QueryRow("SELECT COALESCE(SUM(requests), 0) FROM llm_ledger_rollup").Scan(&rolled); err != nil || rolled != int64(len(orgs)) {
				t.Errorf("rollup sums %d requests (%v), want %d", rolled, err, len(orgs))
			}
		})
	}
}

// TestLedgerIndexes: every index of the records is written on every
// insert, the writer's main cost, so the records carry only those the
// logs, analytics and sweep read (see migrations); an index added or
// left behind by a migration fails here.
func TestLedgerIndexes(t *testing.T) {
	want := []string{"llm_ledger_batch_line_once", "llm_ledger_org_key_ts", "llm_ledger_org_ts",
		"llm_ledger_trace_made", "llm_ledger_trace_sent", "llm_ledger_ws_org_ts"}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			q := "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'llm_ledger' AND sql IS NOT NULL"
			if db.Postgres() {
				q = "SELECT indexname FROM pg_indexes WHERE tablename = 'llm_ledger' AND schemaname = current_schema() AND indexname NOT LIKE '%_pkey'"
			}
			rows, err := db.db.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					t.Fatal(err)
				}
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("indexes on llm_ledger:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestSweepUsesOrganisationIndex: SQLite finds the organisations and
// their expired records through llm_ledger_org_ts, without reading
// every record.
func TestSweepUsesOrganisationIndex(t *testing.T) {
	db := openTest(t, stores[0].dsn(t))
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"SELECT MIN(organisation_d) FROM llm_ledger WHERE organisation_d > ?", []any{1}},
		{"DELETE FROM llm_ledger WHERE organisation_d = ? AND ts < ?", []any{1, 1}},
	} {
		plan := queryPlan(t, db, q.sql, q.args...)
		if !strings.Contains(plan, "USING INDEX llm_ledger_org_ts") && !strings.Contains(plan, "USING COVERING INDEX llm_ledger_org_ts") ||
			strings.Contains(plan, "SCAN llm_ledger") {
			t.Errorf("%s:\n%s", q.sql, plan)
		}
	}
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of q, a step a line.
func queryPlan(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "\n")
}

// TestMigrateKeepsRecordsAndSweeps: a database of the previous schema
// with records in it upgrades in place: its records are read and swept
// as new ones are.
func TestMigrateKeepsRecordsAndSweeps(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			dsn := st.dsn(t)
			writeOldRecord(t, dsn, 6, "old-trace")
			db := openTest(t, dsn)
			ctx := context.Background()
			r := rec("ws", 3*time.Hour, "m", 200, 1)
			if err := db.Insert(ctx, []Record{r}); err != nil {
				t.Fatal(err)
			}
			if _, total, _, err := db.Logs(ctx, &Filter{Workspace: "ws", TraceID: "old-trace"}, 10, 0); err != nil || total != 1 {
				t.Fatalf("the old record by its trace: %d (%v), want 1", total, err)
			}
			if n, err := db.Sweep(ctx, t0.Add(time.Hour)); err != nil || n != 1 {
				t.Fatalf("swept %d (%v), want the old record", n, err)
			}
			got, total, _, err := db.Logs(ctx, &Filter{Workspace: "ws"}, 10, 0)
			if err != nil || total != 1 || got[0].TraceID != r.TraceID {
				t.Errorf("left %d records (%v), want the new one", total, err)
			}
		})
	}
}
