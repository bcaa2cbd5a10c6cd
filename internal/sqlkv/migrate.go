package sqlkv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// migrations are the records schema's steps, applied in order, each once,
// by the gateway when it first reaches the database. {blob} is the
// dialect's byte-string type. Never edit a released step: add one.
var migrations = []string{
	// 1: the records, one typed table; the primary key serves Load and
	// the recursive List (a key range), dir the List of one folder.
	`CREATE TABLE IF NOT EXISTS llm_records (
		key TEXT PRIMARY KEY,
		kind TEXT NOT NULL,
		dir TEXT NOT NULL,
		value {blob} NOT NULL,
		modified BIGINT NOT NULL
	);
	CREATE INDEX IF NOT EXISTS llm_records_dir ON llm_records (dir, key);
	CREATE INDEX IF NOT EXISTS llm_records_kind ON llm_records (kind);
	CREATE TABLE IF NOT EXISTS llm_records_lock (
		name TEXT PRIMARY KEY,
		owner TEXT NOT NULL,
		expires BIGINT NOT NULL
	)`,
}

// advisoryLock is the PostgreSQL advisory lock key the records'
// migrations hold ("llmrecrd"; the ledger's is another).
const advisoryLock = 0x6c6c6d7265637264

// migrateRetrying runs migrate again while SQLite answers SQLITE_BUSY:
// processes opening one new file together race to switch it to WAL,
// and that switch (unlike a write) fails at once instead of waiting out
// the busy timeout. Bounded by ctx and busyRetries.
func (kv *KV) migrateRetrying(ctx context.Context) error {
	for i := 0; ; i++ {
		err := kv.migrate(ctx)
		var se *sqlite.Error
		if err == nil || kv.postgres || i == busyRetries || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(i+1) * 20 * time.Millisecond):
		}
	}
}

// busyRetries bounds migrateRetrying's attempts (about 4 s in all).
const busyRetries = 20

// migrate applies the steps the database has not seen in one transaction
// holding the schema lock: PostgreSQL's transaction-scoped advisory lock,
// SQLite's write lock (BEGIN IMMEDIATE). Instances starting together
// apply each step once.
func (kv *KV) migrate(ctx context.Context) error {
	if err := kv.db.PingContext(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	tx, err := kv.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if kv.postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(advisoryLock)); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS llm_records_schema (version INTEGER NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	var version int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM llm_records_schema").Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("the records schema is version %d, newer than this gateway's %d", version, len(migrations))
	}
	blob := "BLOB"
	if kv.postgres {
		blob = "BYTEA"
	}
	for v := version + 1; v <= len(migrations); v++ {
		for _, stmt := range strings.Split(strings.ReplaceAll(migrations[v-1], "{blob}", blob), ";") {
			if stmt = strings.TrimSpace(stmt); stmt == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("step %d: %v", v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, kv.bind("INSERT INTO llm_records_schema (version, applied_at) VALUES (?, ?)"), v, time.Now().Unix()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// SchemaVersion returns the records schema's applied version.
func (kv *KV) SchemaVersion(ctx context.Context) (int, error) {
	if err := kv.Connect(ctx); err != nil {
		return 0, err
	}
	var v int
	err := kv.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM llm_records_schema").Scan(&v)
	return v, err
}
