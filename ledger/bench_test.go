package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/observe"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// discardStore accepts every batch at once.
type discardStore struct{}

func (discardStore) Insert(context.Context, []Record) error          { return nil }
func (discardStore) Sweep(context.Context, time.Time) (int64, error) { return 0, nil }
func (discardStore) Close() error                                    { return nil }

// BenchmarkRecord is what recording adds to a request: building the
// record from the log entry and queueing it (the writer runs on another
// goroutine).
func BenchmarkRecord(b *testing.B) {
	l := New(discardStore{}, Config{Queue: 1 << 20})
	defer l.Close()
	e := &observe.Entry{TraceID: "0af7651916cd43dd8448eb211c80319c", KeyName: "team-a", Workspace: "4f8e1c7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
		Organisation: "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d", Provider: "openai", Model: "gpt-4o-mini", Operation: providers.OpChat,
		Status: 200, Start: time.Now(), FirstByte: time.Now(), CostUSD: 0.00012, CostKnown: true,
		Usage:    &providers.Usage{PromptTokens: 120, CompletionTokens: 40, TotalTokens: 160},
		Metadata: map[string]string{"_user": "u1", "env": "prod"}, Attempts: []observe.Attempt{{}}}
	b.ReportAllocs()
	for b.Loop() {
		l.Record(e)
	}
}

func benchRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = rec(fmt.Sprintf("ws-%d", i%4), time.Duration(i)*time.Second, []string{"gpt-4o", "claude", "llama"}[i%3], 200, int64(1000+i))
		recs[i].Metadata = map[string]string{"_user": fmt.Sprintf("u%d", i%50)}
	}
	return recs
}

// BenchmarkLedgerThroughput is how many records a second the ledger's
// writer stores, through the queue, in batches of DefaultBatch.
func BenchmarkLedgerThroughput(b *testing.B) {
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			db := openTest(b, st.dsn(b))
			l := New(db, Config{Queue: 1 << 17})
			recs := benchRecords(10_000)
			b.ResetTimer()
			start := time.Now()
			n := 0
			for b.Loop() {
				for i := range recs {
					l.Add(&recs[i])
				}
				if err := l.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
				n += len(recs)
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
			l.Close()
		})
	}
}

// BenchmarkAnalytics1M is an hourly cost series and a group by model
// over one workspace's month of 1,000,000 records.
func BenchmarkAnalytics1M(b *testing.B) {
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			db := openTest(b, st.dsn(b))
			ctx := context.Background()
			const total = 1_000_000
			chunk := make([]Record, 5000)
			for done := 0; done < total; done += len(chunk) {
				for i := range chunk {
					j := done + i
					chunk[i] = rec("ws", time.Duration(j)*2600*time.Millisecond, []string{"gpt-4o", "claude", "llama"}[j%3], 200, int64(1000+j%97))
				}
				if err := db.Insert(ctx, chunk); err != nil {
					b.Fatal(err)
				}
			}
			if db.Postgres() {
				if _, err := db.db.Exec("ANALYZE llm_ledger"); err != nil {
					b.Fatal(err)
				}
			}
			f := &Filter{Workspace: "ws", From: t0, To: t0.Add(31 * 24 * time.Hour)}
			b.ResetTimer()
			for b.Loop() {
				_, all, err := db.Series(ctx, f, 24*time.Hour)
				if err != nil || all.Requests != total {
					b.Fatalf("series over %d records, err %v", all.Requests, err)
				}
			}
		})
	}
}

// BenchmarkInsertGatewayShaped is the writer's cost per record for
// records shaped as the gateway makes them: time-ordered, a few keys and
// models, in batches of DefaultBatch; the records are built before the
// timer runs. Their trace ids are made up by the gateway (UUIDv7,
// trace=made) or sent by clients (random UUIDs, trace=client). Besides
// wall time per record it reports the CPU this process spends per record
// (cpu-ns/record: the embedded database runs in it) and, on PostgreSQL,
// the server's (pg-cpu-ns/record). Run it at 1,000,000 records with
// -benchtime 500x.
func BenchmarkInsertGatewayShaped(b *testing.B) {
	for _, st := range stores {
		for _, tc := range []struct {
			name  string
			trace func() string
		}{
			{"trace=made", func() string { return uuid.Must(uuid.NewV7()).String() }},
			{"trace=client", uuid.NewString},
		} {
			b.Run(st.name+"/"+tc.name, func(b *testing.B) { benchInsertShaped(b, st.name, st.dsn(b), tc.trace) })
		}
	}
}

func benchInsertShaped(b *testing.B, store, dsn string, trace func() string) {
	meter := &cpuMeter{}
	if store == "postgres" {
		meter.appName = fmt.Sprintf("ledgerbench-%d-%d", os.Getpid(), schemaSeq.Add(1))
		admin, err := sql.Open("pgx", postgresDSN())
		if err != nil {
			b.Fatal(err)
		}
		defer admin.Close()
		meter.pg = admin
		dsn += "&application_name=" + meter.appName
	}
	db := openTest(b, dsn)
	const batches = 64
	recs := make([][]Record, batches)
	for i := range recs {
		recs[i] = make([]Record, DefaultBatch)
	}
	n := 0
	// The records' times follow the wall clock, as the gateway's do, so
	// made-up ids are time-ordered against them.
	start := time.Now().Add(-time.Hour)
	fill := func() {
		for _, batch := range recs {
			for j := range batch {
				batch[j] = rec(fmt.Sprintf("ws-%d", n%4), time.Duration(n)*100*time.Microsecond, []string{"gpt-4o", "claude", "llama"}[n%3], 200, int64(1000+n%97))
				batch[j].Time = start.Add(time.Duration(n) * 100 * time.Microsecond)
				batch[j].TraceID = trace()
				n++
			}
		}
	}
	fill()
	b.ResetTimer()
	meter.start()
	written := 0
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%batches == 0 {
			meter.stop()
			b.StopTimer()
			fill()
			b.StartTimer()
			meter.start()
		}
		if err := db.Insert(context.Background(), recs[i%batches]); err != nil {
			b.Fatal(err)
		}
		written += DefaultBatch
	}
	meter.report(b, written)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(written), "ns/record")
}

// BenchmarkTraceLookup finds one record by a client's trace id among
// 1,000,000 records of client trace ids (the bucket index), through the
// logs query a trace filter makes.
func BenchmarkTraceLookup(b *testing.B) {
	db := openTest(b, filepath.Join(b.TempDir(), "ledger.db"))
	const total = 1_000_000
	ids := make([]string, 0, total)
	start := time.Now().Add(-2 * time.Hour)
	batch := make([]Record, 0, DefaultBatch)
	for n := 0; n < total; n++ {
		r := rec(fmt.Sprintf("ws-%d", n%4), 0, "gpt-4o", 200, 1)
		r.Organisation, r.Time, r.TraceID = "org", start.Add(time.Duration(n)*5*time.Millisecond), uuid.NewString()
		ids = append(ids, r.TraceID)
		if batch = append(batch, r); len(batch) == DefaultBatch {
			if err := db.Insert(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := ids[(i*7919)%total]
		got, n, _, err := db.Logs(context.Background(), &Filter{Organisation: "org", TraceID: id}, 50, 0)
		if err != nil || n != 1 || got[0].TraceID != id {
			b.Fatalf("lookup %s: %d records, %v", id, n, err)
		}
	}
}

// BenchmarkMigrateNarrow1M is migration 8 over 1,000,000 records of the
// step-7 schema (four workspaces and keys, three models, client trace
// ids, metadata): the one-time copy a start waits for when it upgrades.
// Run it with -benchtime 1x.
func BenchmarkMigrateNarrow1M(b *testing.B) {
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			const total = 1_000_000
			for b.Loop() {
				b.StopTimer()
				dsn := st.dsn(b)
				all := migrations
				migrations = all[:7]
				old, err := openMigrated(context.Background(), dsn)
				migrations = all
				if err != nil {
					b.Fatal(err)
				}
				q := `INSERT INTO llm_ledger (ts, trace_id, api_key, workspace_id, organisation_id, virtual_key, config_id,
					provider, model, operation, status, stream, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
					reasoning_tokens, cost_nano_usd, latency_us, ttft_us, cache_state, retries, metadata, trace_bucket, trace_hash)
					SELECT 1772366400000000 + i * 2600000, 'trace-' || i, 'key-ws-' || (i % 4), 'ws-' || (i % 4), 'org', '', '',
					'openai', CASE i % 3 WHEN 0 THEN 'gpt-4o' WHEN 1 THEN 'claude' ELSE 'llama' END, 'chat.completions', 200, 0,
					10, 5, 0, 0, 0, 1000 + i % 97, 120000, NULL, 'MISS', 0, '{"_user":"u' || (i % 50) || '"}', i % 64, i * 7919
					FROM ` + seriesSQL(old.Postgres(), total)
				if _, err := old.db.Exec(q); err != nil {
					b.Fatal(err)
				}
				old.Close()
				meter := &cpuMeter{}
				b.StartTimer()
				meter.start()
				db := openTest(b, dsn)
				meter.stop()
				b.StopTimer()
				var n int64
				if err := db.db.QueryRow("SELECT COUNT(*) FROM llm_ledger").Scan(&n); err != nil || n != total {
					b.Fatalf("%d records after the migration (%v)", n, err)
				}
				b.ReportMetric(float64(meter.self.Milliseconds()), "gateway-cpu-ms")
				b.StartTimer()
			}
		})
	}
}

// seriesSQL is a table of the integers 0 to n-1 as column i.
func seriesSQL(postgres bool, n int) string {
	if postgres {
		return fmt.Sprintf("generate_series(0, %d) AS s(i)", n-1)
	}
	return fmt.Sprintf("(WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < %d) SELECT i FROM c)", n)
}
