package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// oldRecords are records of every shape the step-7 schema held: two
// organisations and workspaces, each optional column set and unset, a
// batch line, a client's trace id (bucketed) and a made-up one.
func oldRecords() []Record {
	base := rec("ws-a", 0, "gpt-4o", 200, 1200)
	full := base
	full.Time, full.TraceID = t0.Add(time.Minute), "4bf92f3577b34da6a3ce929d0e0e4736"
	full.VirtualKey, full.ConfigID, full.CacheState, full.Stream, full.Estimated = "vk-1", "cfg-1", "SEMANTIC HIT", true, true
	full.CachedTokens, full.CacheWriteTokens, full.ReasoningTokens, full.Retries = 3, 4, 5, 2
	full.TTFT, full.Metadata = 40*time.Millisecond, map[string]string{"_user": "u1", "env": `pr"od`}
	unknown := rec("ws-b", 2*time.Minute, "llama", 502, 0)
	unknown.Organisation, unknown.CostKnown, unknown.Provider = "org-2", false, "bedrock"
	line := rec("ws-a", 3*time.Minute, "gpt-4o", 200, 7)
	line.BatchID, line.CustomID, line.Operation = "batch_1", "req-1", "batch.line"
	made := rec("ws-a", 4*time.Minute, "claude", 429, 0)
	ms := made.Time.UnixMilli()
	made.TraceID = fmt.Sprintf("%08x-%04x-7a1b-9c2d-3e4f5a6b7c8d", ms>>16, ms&0xffff)
	return []Record{base, full, unknown, line, made}
}

// writeStep7 writes recs to dsn's ledger at step 7 of the schema, as the
// gateway before migration 8 did, and returns their ids.
func writeStep7(t *testing.T, dsn string, recs []Record) []int64 {
	t.Helper()
	all := migrations
	migrations = all[:7]
	defer func() { migrations = all }()
	old, err := openMigrated(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	ids := make([]int64, len(recs))
	for i := range recs {
		r := &recs[i]
		var cost, ttft, batch, custom any
		if r.CostKnown {
			cost = r.CostNanoUSD
		}
		if r.TTFT > 0 {
			ttft = r.TTFT.Microseconds()
		}
		if r.BatchID != "" {
			batch, custom = r.BatchID, r.CustomID
		}
		md := "{}"
		if len(r.Metadata) > 0 {
			b, _ := json.Marshal(r.Metadata)
			md = string(b)
		}
		bucket, hash := traceKey(r.TraceID, r.Time.Add(-r.Latency))
		flag := func(v bool) int64 {
			if v {
				return 1
			}
			return 0
		}
		err := old.db.QueryRow(old.d.bind(`INSERT INTO llm_ledger (ts, trace_id, api_key, workspace_id, organisation_id,
			virtual_key, config_id, provider, model, operation, status, stream, input_tokens, output_tokens, cached_tokens,
			cache_write_tokens, reasoning_tokens, cost_nano_usd, latency_us, ttft_us, cache_state, retries, metadata,
			batch_id, custom_id, estimated, trace_bucket, trace_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
			r.Time.UnixMicro(), r.TraceID, r.APIKey, r.Workspace, r.Organisation, r.VirtualKey, r.ConfigID, r.Provider,
			r.Model, r.Operation, int64(r.Status), flag(r.Stream), r.InputTokens, r.OutputTokens, r.CachedTokens,
			r.CacheWriteTokens, r.ReasoningTokens, cost, r.Latency.Microseconds(), ttft, r.CacheState, int64(r.Retries),
			md, batch, custom, flag(r.Estimated), bucket, hash).Scan(&ids[i])
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestMigrateNarrowKeepsEveryRecord: a ledger of the step-7 schema
// upgrades to narrow records (migration 8) with every record, field for
// field, under its id: the logs API's query returns each, by scope, by
// id, by trace and by each name filter; analytics group them by name;
// new records take ids above the old ones; a batch line stays once.
func TestMigrateNarrowKeepsEveryRecord(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			dsn := st.dsn(t)
			want := oldRecords()
			ids := writeStep7(t, dsn, want)
			db := openTest(t, dsn)
			ctx := context.Background()
			for i := range want {
				w := want[i]
				w.ID, w.Time = ids[i], w.Time.UTC()
				got, n, _, err := db.Logs(ctx, &Filter{Organisation: w.Organisation, ID: ids[i]}, 10, 0)
				if err != nil || n != 1 {
					t.Fatalf("record %d by id: %d (%v)", i, n, err)
				}
				if !reflect.DeepEqual(got[0], w) {
					t.Errorf("record %d after the migration:\n%+v\nwant\n%+v", i, got[0], w)
				}
				if _, n, _, err := db.Logs(ctx, &Filter{Workspace: w.Workspace, Organisation: w.Organisation, TraceID: w.TraceID}, 10, 0); err != nil || n != 1 {
					t.Errorf("record %d by its trace: %d (%v)", i, n, err)
				}
			}
			for _, c := range []struct {
				f    Filter
				want int64
			}{
				{Filter{Organisation: "org"}, 4},
				{Filter{Workspace: "ws-a", Organisation: "org"}, 4},
				{Filter{Organisation: "org-2"}, 1},
				{Filter{Organisation: "org", APIKeys: []string{"key-ws-a"}}, 4},
				{Filter{Organisation: "org", Models: []string{"claude", "llama"}}, 1},
				{Filter{Organisation: "org", VirtualKeys: []string{"vk-1"}, Configs: []string{"cfg-1"}, CacheStates: []string{"SEMANTIC HIT"}}, 1},
				{Filter{Organisation: "org-2", Providers: []string{"bedrock"}}, 1},
				{Filter{Organisation: "org", Metadata: map[string]string{"env": `pr"od`}}, 1},
				{Filter{Organisation: "org", Statuses: []int{429}}, 1},
				{Filter{Organisation: "nobody"}, 0},
			} {
				if _, n, _, err := db.Logs(ctx, &c.f, 10, 0); err != nil || n != c.want {
					t.Errorf("%+v: %d records (%v), want %d", c.f, n, err, c.want)
				}
			}
			groups, _, err := db.Groups(ctx, &Filter{Organisation: "org", From: t0, To: t0.Add(10 * time.Minute)}, ByModel, "", 10, 0)
			if err != nil || len(groups) != 2 || groups[0].Value != "gpt-4o" || groups[0].Requests != 3 || groups[1].Value != "claude" {
				t.Errorf("groups by model: %+v (%v)", groups, err)
			}
			next := rec("ws-a", 5*time.Minute, "gpt-4o", 200, 1)
			dup := want[3]
			if err := db.Insert(ctx, []Record{next, dup}); err != nil {
				t.Fatal(err)
			}
			got, n, _, err := db.Logs(ctx, &Filter{Workspace: "ws-a", Organisation: "org"}, 1, 0)
			if err != nil || n != 5 || got[0].ID <= ids[len(ids)-1] || got[0].TraceID != next.TraceID {
				t.Errorf("after a new record: %d records (%v), newest %+v, want 5 and an id above %d", n, err, got, ids[len(ids)-1])
			}
			var old int
			q := "SELECT COUNT(*) FROM sqlite_master WHERE name = 'llm_ledger_v1'"
			if db.Postgres() {
				q = "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'llm_ledger_v1' AND schemaname = current_schema()"
			}
			if err := db.db.QueryRow(q).Scan(&old); err != nil || old != 0 {
				t.Errorf("the old table is left (%d, %v)", old, err)
			}
		})
	}
}
