package sqlkv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// postgresDSN is the test PostgreSQL, as the ledger's tests find it:
// $LEDGER_TEST_POSTGRES, else the one CI provides.
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

// postgresTestDSN returns a DSN of a fresh schema (sqlkv_test_*) of the
// test database, dropped when tb ends; it skips tb when PostgreSQL is
// away, unless CI requires it.
func postgresTestDSN(tb testing.TB) string {
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
		tb.Skipf("skipping: PostgreSQL is unreachable (%v)", pgProbeErr)
	}
	schema := fmt.Sprintf("sqlkv_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	admin, err := sql.Open("pgx", postgresDSN())
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
	if strings.Contains(postgresDSN(), "?") {
		sep = "&"
	}
	return postgresDSN() + sep + "search_path=" + schema
}

// databases returns one DSN per database the tests run on: a SQLite file
// and a PostgreSQL schema.
func databases(t *testing.T) map[string]string {
	return map[string]string{
		"sqlite":   filepath.Join(t.TempDir(), "records.db"),
		"postgres": "", // filled by open, which may skip
	}
}

// open opens dsn ("" for a fresh PostgreSQL schema), closed at the end.
func open(t testing.TB, name, dsn string) *KV {
	t.Helper()
	if name == "postgres" && dsn == "" {
		dsn = postgresTestDSN(t)
	}
	kv, err := Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}

// pair opens two handles (two instances) on one fresh database.
func pair(t *testing.T, name, dsn string) (*KV, *KV) {
	t.Helper()
	if name == "postgres" {
		dsn = postgresTestDSN(t)
	}
	return open(t, name, dsn), open(t, name, dsn)
}
