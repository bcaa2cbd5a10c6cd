package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// postgresDSN is the test PostgreSQL: $LEDGER_TEST_POSTGRES, else the one
// CI provides (trust auth, user postgres, database test).
func postgresDSN() string {
	if v := os.Getenv("LEDGER_TEST_POSTGRES"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var (
	pgProbe    sync.Once
	pgProbeErr error
	schemaSeq  atomic.Int64
)

// requirePostgres skips tb when PostgreSQL is unreachable, or fails it
// when CI requires the databases (REQUIRE_REDIS=1 or CI set).
func requirePostgres(tb testing.TB) {
	tb.Helper()
	pgProbe.Do(func() {
		db, err := sql.Open("pgx", postgresDSN())
		if err != nil {
			pgProbeErr = err
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		pgProbeErr = db.PingContext(ctx)
	})
	if pgProbeErr != nil {
		if os.Getenv("REQUIRE_REDIS") == "1" || os.Getenv("CI") != "" {
			tb.Fatalf("PostgreSQL at %s is unreachable and CI requires it: %v", postgresDSN(), pgProbeErr)
		}
		tb.Skipf("skipping: PostgreSQL is unreachable (%v); set LEDGER_TEST_POSTGRES or REQUIRE_REDIS=1 to make this a failure", pgProbeErr)
	}
}

// PostgresTestDSN returns a DSN of a fresh schema of the test database,
// dropped when tb ends, so tests never see each other's records.
func postgresTestDSN(tb testing.TB) string {
	tb.Helper()
	requirePostgres(tb)
	base := postgresDSN()
	schema := fmt.Sprintf("ledger_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
		admin.Close()
	})
	sep := "?"
	if containsByte(base, '?') {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// stores are the databases every store test runs against.
var stores = []struct {
	name string
	dsn  func(testing.TB) string
}{
	{"sqlite", func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "ledger.db") }},
	{"postgres", postgresTestDSN},
}

func openTest(tb testing.TB, dsn string) *DB {
	tb.Helper()
	db, err := Open(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rec returns a record of workspace ws at t0+at.
func rec(ws string, at time.Duration, model string, status int, costNano int64) Record {
	return Record{
		Time: t0.Add(at), TraceID: fmt.Sprintf("trace-%s-%d", ws, at), APIKey: "key-" + ws, Workspace: ws,
		Organisation: "org", Provider: "openai", Model: model, Operation: "chat.completions", Status: status,
		InputTokens: 10, OutputTokens: 5, CostNanoUSD: costNano, CostKnown: true, Latency: 120 * time.Millisecond,
	}
}
