package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// The two stores' database/sql drivers: pgx for PostgreSQL, modernc's
	// pure-Go SQLite (no cgo) for the embedded store.
	_ "github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is where a Ledger writes its batches.
type Store interface {
	// Insert writes records in one transaction.
	Insert(ctx context.Context, recs []Record) error
	// Sweep deletes records that finished before before.
	Sweep(ctx context.Context, before time.Time) (int64, error)
	Close() error
}

// DB is a ledger database: SQLite or PostgreSQL, one schema, written by
// Insert and read by the query methods (query.go).
type DB struct {
	db *sql.DB
	d  dialect
	// dsn names the database in errors without its credentials.
	name  string
	stmts stmts
	// sqlText are the texts of the writer's statements (prepare).
	sqlText map[stmtKey]string
	// ready is set once Connect has migrated the schema and prepared
	// the statements; until then writes and queries answer ErrNotReady.
	ready  atomic.Bool
	connMu sync.Mutex
	// dims caches the dictionary (dims.go).
	dims dimCache
	// wconn is the SQLite writer's own connection (nil for PostgreSQL
	// and ":memory:", whose one connection is everyone's); wmu is held
	// while a transaction uses it.
	wconn *sql.Conn
	wmu   sync.Mutex
	// memory is a private in-memory SQLite database.
	memory bool
}

// Ping reports whether the database answers within ctx and its schema
// is in place (Connect): readiness probes ask it (package health), so a
// replica whose ledger database is away stops taking traffic.
func (s *DB) Ping(ctx context.Context) error {
	if !s.ready.Load() {
		return ErrNotReady
	}
	return s.db.PingContext(ctx)
}

// dialect is what differs between the two databases.
type dialect struct {
	postgres bool
}

// bind rewrites a query's ? placeholders as $1, $2… for PostgreSQL.
func (d dialect) bind(q string) string {
	if !d.postgres {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// metadataValue is the SQL expression of a record's metadata value under
// the key given as the next argument.
func (d dialect) metadataValue() string {
	if d.postgres {
		return "(metadata::jsonb ->> ?)"
	}
	return "json_extract(metadata, ?)"
}

// metadataArg is the argument metadataValue takes for key. Keys are
// checked (ValidMetadataKey) before they get here; SQLite's JSON path
// quotes the key so dots in it are not path steps.
func (d dialect) metadataArg(key string) string {
	if d.postgres {
		return key
	}
	return `$."` + key + `"`
}

// Open opens the ledger database dsn: a postgres:// or postgresql:// URL
// for PostgreSQL, else the path of a SQLite file (":memory:" for a
// private in-memory database), and applies the schema's migrations.
func Open(ctx context.Context, dsn string) (*DB, error) {
	s, err := OpenDeferred(dsn)
	if err != nil {
		return nil, err
	}
	if err := s.Connect(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openMigrated opens dsn and migrates it without preparing the writer's
// statements (a test opens a database at an older step of the schema
// with it).
func openMigrated(ctx context.Context, dsn string) (*DB, error) {
	out, err := OpenDeferred(dsn)
	if err != nil {
		return nil, err
	}
	if err := out.migrateRetrying(ctx); err != nil {
		out.db.Close()
		return nil, fmt.Errorf("ledger: migrating %s: %w", out.name, err)
	}
	return out, nil
}

// OpenDeferred is Open without the migrations: Connect applies them.
// It talks to no PostgreSQL server, so a gateway whose ledger database
// is away still starts; a SQLite file is created (createPrivate) and
// opened.
func OpenDeferred(dsn string) (*DB, error) {
	var (
		db  *sql.DB
		err error
		out = &DB{}
	)
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		out.d.postgres = true
		out.name = "postgres"
		db, err = sql.Open("pgx", dsn)
		if err == nil {
			db.SetMaxOpenConns(8)
			db.SetMaxIdleConns(4)
		}
	case dsn == "":
		return nil, errors.New("ledger: no database given")
	default:
		out.name = "sqlite " + dsn
		conn := dsn
		if dsn != ":memory:" {
			conn = "file:" + dsn
			if err := createPrivate(dsn); err != nil {
				return nil, fmt.Errorf("ledger: creating %s: %v", out.name, err)
			}
		}
		// WAL lets the APIs read while the writer writes; the busy
		// timeout makes a second process (or a reload's new config) wait
		// for the lock instead of failing. A 16 MB page cache (SQLite's
		// default is 2 MB) keeps the indexes' pages in memory instead of
		// reading them back for every batch, and checkpoints every 8,192
		// pages instead of 1,000 write a page touched by many batches
		// once: together 59 → 35 µs of the writer's CPU per record at
		// 5,000 records a second (docs/performance.md).
		conn += "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-16384)&_pragma=wal_autocheckpoint(8192)&_txlock=immediate"
		db, err = sql.Open("sqlite", conn)
		switch {
		case err == nil && dsn == ":memory:":
			// Each connection of :memory: is its own database.
			db.SetMaxOpenConns(1)
			out.memory = true
		case err == nil:
			// Each connection has its own page cache: the writer and
			// seven readers bound the ledger's memory to 128 MB.
			db.SetMaxOpenConns(8)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: opening %s: %v", out.name, err)
	}
	out.db = db
	return out, nil
}

// createPrivate creates the SQLite file at path, empty and 0600, when it
// does not exist yet, and its directory (0700) when that is missing:
// SQLite would create it with the umask's mode (0644 usually), readable
// by every user of the host, and gives its -wal and -shm files the
// database file's mode. A file that exists keeps the mode it has.
func createPrivate(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// migrateRetrying migrates, retrying while SQLite reports the file busy.
// The busy timeout covers waiting for a writer, but SQLite answers
// SQLITE_BUSY at once, without calling the busy handler, where waiting
// could deadlock: a connection switching a new file to WAL while another
// opens it, or a read lock upgrading. Instances (or a reload's new
// config) opening one file together then retry instead of failing.
func (s *DB) migrateRetrying(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := s.migrate(ctx)
		var se *sqlite.Error
		if err == nil || s.d.postgres || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// Close closes the database.
func (s *DB) Close() error {
	s.closeStmts()
	if s.wconn != nil {
		s.wconn.Close()
	}
	return s.db.Close()
}

// Postgres reports whether the database is PostgreSQL.
func (s *DB) Postgres() bool { return s.d.postgres }

// columns are the record columns, in order: what a batch line's INSERT
// writes. The names are dictionary ids (dimColumns); detail holds the
// columns no query reads (rowjson.go).
const columns = "ts, trace_id, key_d, workspace_d, organisation_d, virtual_key_d, config_d, provider_d, model_d, cache_state_d, " +
	"status, input_tokens, output_tokens, cost_nano_usd, latency_us, error_type, metadata, detail, batch_id, custom_id"

const nColumns = 20

// insertColumns are what an INSERT writes beyond columns: the trace key
// (traceKey), which the logs do not read.
const (
	insertColumns  = ", trace_bucket, trace_hash"
	nInsertColumns = 2
)

// bulkColumns are columns without a batch line's two, which the bulk
// INSERT of other records leaves NULL: two binds fewer a record (each
// takes SQLite's connection mutex in modernc's driver).
const bulkColumns = "ts, trace_id, key_d, workspace_d, organisation_d, virtual_key_d, config_d, provider_d, model_d, cache_state_d, " +
	"status, input_tokens, output_tokens, cost_nano_usd, latency_us, error_type, metadata, detail"

const nBulkColumns = nColumns - 2

// Sweep implements Store. It deletes whole hours only (before is cut
// to the hour), so the rollup and the records it sums always agree.
// Records are found through the organisation's time index, one
// organisation after the other (each the least above the last: one
// index seek), since no index on time alone is kept (migration 7).
func (s *DB) Sweep(ctx context.Context, before time.Time) (int64, error) {
	if !s.ready.Load() {
		return 0, ErrNotReady
	}
	cutoff := before.Truncate(rollupHour).UnixMicro()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var (
		deleted int64
		org     sql.NullInt64
	)
	next := "SELECT MIN(organisation_d) FROM llm_ledger"
	if err := tx.QueryRowContext(ctx, next).Scan(&org); err != nil {
		return 0, err
	}
	del := s.d.bind("DELETE FROM llm_ledger WHERE organisation_d = ? AND ts < ?")
	next = s.d.bind(next + " WHERE organisation_d > ?")
	for org.Valid {
		res, err := tx.ExecContext(ctx, del, org.Int64, cutoff)
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		deleted += n
		if err := tx.QueryRowContext(ctx, next, org.Int64).Scan(&org); err != nil {
			return 0, err
		}
	}
	if _, err := tx.ExecContext(ctx, s.d.bind("DELETE FROM llm_ledger_rollup WHERE hour < ?"), cutoff); err != nil {
		return 0, err
	}
	return deleted, tx.Commit()
}
