// Package sqlkvtest gives tests a fresh PostgreSQL schema of the test
// database CI provides at 127.0.0.1:5432 (or $LEDGER_TEST_POSTGRES, as the
// ledger's tests find it). Without it a test is skipped, unless CI
// requires the databases (REQUIRE_REDIS=1 or CI set).
package sqlkvtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the pgx driver
)

// BaseDSN is the test PostgreSQL, as the ledger's tests find it:
// $LEDGER_TEST_POSTGRES, else the one CI provides.
func BaseDSN() string {
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

// PostgresDSN returns a DSN of a fresh schema (sqlkv_test_*) of the
// test database, dropped when tb ends; it skips tb when PostgreSQL is
// away, unless CI requires it.
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	pgProbe.Do(func() {
		db, err := sql.Open("pgx", BaseDSN())
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
			tb.Fatalf("PostgreSQL at %s is unreachable and CI requires it: %v", BaseDSN(), pgProbeErr)
		}
		tb.Skipf("skipping: PostgreSQL is unreachable (%v)", pgProbeErr)
	}
	schema := fmt.Sprintf("sqlkv_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	admin, err := sql.Open("pgx", BaseDSN())
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
	if strings.Contains(BaseDSN(), "?") {
		sep = "&"
	}
	return BaseDSN() + sep + "search_path=" + schema
}
