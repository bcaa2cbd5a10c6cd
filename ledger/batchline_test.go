package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// TestBatchLineRecordedOnce writes the records of a batch's lines, some
// of them twice (within one write and across writes, as two instances
// that both ran a line would), and sees one record per line in the logs
// and in the rollup's totals, with ordinary records beside them kept.
func TestBatchLineRecordedOnce(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			line := func(i int, costNano int64) Record {
				r := rec("ws", time.Duration(i)*time.Second, "m", 200, costNano)
				r.BatchID, r.CustomID = "batch_gw_1", fmt.Sprintf("req-%d", i)
				return r
			}
			plain := rec("ws", 0, "m", 200, 7)
			// Lines 0–9, then 5–14 again (the second run of 5–9 cost
			// more: the first record stays), twice within one write.
			var first, second []Record
			for i := 0; i < 10; i++ {
				first = append(first, line(i, 100))
			}
			first = append(first, plain, line(3, 999))
			for i := 5; i < 15; i++ {
				second = append(second, line(i, 100))
			}
			second[0].CostNanoUSD = 555 // line 5's second run
			second = append(second, plain)
			for _, recs := range [][]Record{first, second} {
				if err := db.Insert(ctx, recs); err != nil {
					t.Fatal(err)
				}
			}
			got, total, _, err := db.Logs(ctx, &Filter{Workspace: "ws"}, 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			lines := map[string]int64{}
			for _, r := range got {
				if r.BatchID != "" {
					if _, dup := lines[r.CustomID]; dup {
						t.Errorf("%s recorded twice", r.CustomID)
					}
					lines[r.CustomID] = r.CostNanoUSD
				}
			}
			if total != 17 || len(lines) != 15 {
				t.Fatalf("%d records, %d lines; want 15 lines and the 2 plain records", total, len(lines))
			}
			if lines["req-3"] != 100 || lines["req-5"] != 100 {
				t.Errorf("a line's first record must stay: req-3 %d, req-5 %d", lines["req-3"], lines["req-5"])
			}
			_, sum, err := db.Series(ctx, &Filter{Workspace: "ws", From: t0, To: t0.Add(2 * time.Hour)}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Requests != 17 || sum.CostNanoUSD != 15*100+2*7 {
				t.Errorf("rollup totals %+v, want 17 requests costing %d", sum, 15*100+2*7)
			}
		})
	}
}

// TestDuplicateChargeIsNotRecorded: a batch line's run that another run
// already charged is not queued at all; its line and estimate marks are
// kept on the record of the run that counts.
func TestDuplicateChargeIsNotRecorded(t *testing.T) {
	e := &observe.Entry{Workspace: "ws", Operation: "chat.completions", BatchID: "b", CustomID: "c", Status: 200,
		Usage: &providers.Usage{PromptTokens: 1}, UsageEstimated: true}
	if !recordable(e) {
		t.Fatal("the charged run is not recordable")
	}
	var r Record
	r.FromEntry(e, time.Now())
	if r.BatchID != "b" || r.CustomID != "c" || !r.Estimated {
		t.Errorf("record %+v lost the line or the estimate mark", r)
	}
	e.ChargeDuplicate = true
	if recordable(e) {
		t.Error("a duplicate run is recordable")
	}
}

// TestMigrateToBatchLines: a ledger written before migration 3 keeps its
// records when a newer gateway adds the batch line columns and key.
func TestMigrateToBatchLines(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			dsn := st.dsn(t)
			writeOldRecord(t, dsn, 2, "t")
			db := openTest(t, dsn)
			r := line0()
			if err := db.Insert(context.Background(), []Record{r, r}); err != nil {
				t.Fatal(err)
			}
			got, total, _, err := db.Logs(context.Background(), &Filter{Workspace: "ws"}, 10, 0)
			if err != nil || total != 2 {
				t.Fatalf("%d records after the migration (%v), want the old one and one line", total, err)
			}
			if got[1].BatchID != "" || got[1].Estimated || got[1].CostNanoUSD != 5 || got[0].CustomID != "req-0" {
				t.Errorf("records after the migration: %+v", got)
			}
		})
	}
}

// writeOldRecord writes to dsn, migrated to its first steps steps only,
// a record of trace id trace as the gateway of migration 2 wrote it (none
// of the later columns).
func writeOldRecord(t *testing.T, dsn string, steps int, trace string) {
	t.Helper()
	all := migrations
	migrations = all[:steps]
	defer func() { migrations = all }()
	old, err := openMigrated(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	_, err = old.db.Exec(old.d.bind(`INSERT INTO llm_ledger (ts, trace_id, api_key, workspace_id, organisation_id,
		virtual_key, config_id, provider, model, operation, status, stream, input_tokens, output_tokens, cached_tokens,
		cache_write_tokens, reasoning_tokens, cost_nano_usd, latency_us, ttft_us, cache_state, retries, metadata)
		VALUES (?, ?, 'k', 'ws', 'org', '', '', 'openai', 'm', 'chat.completions', 200, 0, 1, 1, 0, 0, 0, 5, 1, NULL, '', 0, '{}')`),
		t0.UnixMicro(), trace)
	if err != nil {
		t.Fatal(err)
	}
}

func line0() Record {
	r := rec("ws", time.Second, "m", 200, 9)
	r.BatchID, r.CustomID = "batch_gw_2", "req-0"
	return r
}
