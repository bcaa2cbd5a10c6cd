// Package sqlkv keeps the control plane's records (API keys, virtual keys,
// configs and their versions, prompts and their versions, rate-limit and
// usage-limit policies, the audit log) in SQL: the embedded SQLite file
// beside the ledger's, or the ledger's PostgreSQL. A KV is a
// certmagic.Storage (so every record store of the gateway takes it as it
// takes Caddy's storage) that also compares and swaps one record in one
// statement (kvstore.Swapper).
//
// Records are rows of one typed table, llm_records: the record's key (the
// path the stores name it by, such as "llm_gateway/keys/api_keys/<id>.json"),
// its kind (api_key, virtual_key, config, audit, prompt, rate_limit_policy,
// usage_limit_policy, meta; derived from the key, for operators' queries),
// its folder (for listing one folder through an index), the value as
// stored and the time of the last write. Redis, when configured, stays
// the change feed and the counters' home: a Redis FLUSHDB or an eviction
// no longer deletes a record.
package sqlkv

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

	"github.com/caddyserver/certmagic"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"

	// The database/sql drivers the ledger uses too: pgx for PostgreSQL,
	// modernc's pure-Go SQLite for the embedded store.
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// KV is the record store over one database. Its methods reach the
// database (and apply the schema's migrations) on first use, so a gateway
// whose PostgreSQL is away still starts and its record stores retry.
type KV struct {
	db       *sql.DB
	postgres bool
	name     string
	now      func() time.Time

	connMu    sync.Mutex
	ready     atomic.Bool
	migrated  bool
	onConnect func(context.Context) error

	locksMu sync.Mutex
	locks   map[string]*heldLock
}

// Open returns the KV of dsn: a postgres:// or postgresql:// URL, else the
// path of a SQLite file (created 0600 when missing). It does not reach a
// PostgreSQL server; the first call does.
func Open(dsn string) (*KV, error) {
	kv := &KV{now: time.Now, locks: map[string]*heldLock{}}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		kv.postgres, kv.name = true, "postgres"
		kv.db, err = sql.Open("pgx", dsn)
		if err == nil {
			kv.db.SetMaxOpenConns(4)
			kv.db.SetMaxIdleConns(2)
		}
	case dsn == "" || dsn == ":memory:":
		return nil, errors.New("sqlkv: records need a database file or a postgres:// URL")
	default:
		kv.name = "sqlite " + dsn
		if err := createPrivate(dsn); err != nil {
			return nil, fmt.Errorf("sqlkv: creating %s: %v", kv.name, err)
		}
		// WAL lets readers read while one connection writes; the busy
		// timeout makes another process or connection wait for the
		// write lock instead of failing; _txlock=immediate takes it at
		// BEGIN, so the migration's transaction is the schema lock.
		kv.db, err = sql.Open("sqlite", "file:"+dsn+
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
		if err == nil {
			kv.db.SetMaxOpenConns(4)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlkv: opening %s: %v", kv.name, err)
	}
	return kv, nil
}

// createPrivate creates path (and its folder) readable by its owner only:
// the records hold key digests and sealed credentials.
func createPrivate(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// Close closes the database.
func (kv *KV) Close() error { return kv.db.Close() }

// Postgres reports whether the records are in PostgreSQL.
func (kv *KV) Postgres() bool { return kv.postgres }

// String names the database without its credentials (for logs).
func (kv *KV) String() string { return kv.name }

// DB returns the database (tests and benchmarks fill it in bulk).
func (kv *KV) DB() *sql.DB { return kv.db }

// OnConnect sets fn to run once, after the migrations, before Connect
// first succeeds (the one-time import): until it succeeds every method
// fails, so no store reads the records before they are all in. Set it
// before first use.
func (kv *KV) OnConnect(fn func(ctx context.Context) error) { kv.onConnect = fn }

// importTimeout bounds OnConnect's function.
const importTimeout = 30 * time.Minute

// connecting marks the context of OnConnect's function, whose calls of
// the KV's methods must not wait for Connect.
type connecting struct{}

// Connect applies the schema's migrations and runs OnConnect's function,
// once; later calls return at once. Every other method calls it first.
func (kv *KV) Connect(ctx context.Context) error {
	if kv.ready.Load() || ctx.Value(connecting{}) != nil {
		return nil
	}
	kv.connMu.Lock()
	defer kv.connMu.Unlock()
	if kv.ready.Load() {
		return nil
	}
	if !kv.migrated {
		if err := kv.migrateRetrying(ctx); err != nil {
			return fmt.Errorf("sqlkv: migrating %s: %w", kv.name, err)
		}
		kv.migrated = true
	}
	if kv.onConnect != nil {
		// Once the database answers, the import runs on its own clock
		// (as the ledger's migrations do): at a million records it
		// outlasts the bound a start puts on reaching the database, and
		// one cut short would start over.
		c, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), connecting{}, true), importTimeout)
		defer cancel()
		if err := kv.onConnect(c); err != nil {
			return err
		}
	}
	kv.ready.Store(true)
	return nil
}

// bind rewrites a query's ? placeholders as $1, $2… for PostgreSQL (the
// queries hold no literal question marks).
func (kv *KV) bind(q string) string {
	if !kv.postgres {
		return q
	}
	var b strings.Builder
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

// MaxKey bounds a record key's length; MaxValue a record's size. The
// stores write far less (a prompt with all its versions is the largest).
const (
	MaxKey   = 1024
	MaxValue = 16 << 20
)

func checkKey(key string) error {
	if key == "" || len(key) > MaxKey || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return fmt.Errorf("sqlkv: invalid key %q", key)
	}
	return nil
}

// dirOf is a key's folder ("" for a key without one).
func dirOf(key string) string {
	if i := strings.LastIndexByte(key, '/'); i > 0 {
		return key[:i]
	}
	return ""
}

// kinds name the records under each folder for the kind column, first
// match wins; the stores' folders are fixed (a Redis key_prefix may come
// before them).
var kinds = []struct{ part, kind string }{
	{"llm_gateway/keys/api_keys/", "api_key"},
	{"llm_gateway/keys/virtual_keys/", "virtual_key"},
	{"llm_gateway/keys/configs/", "config"},
	{"llm_gateway/keys/audit/", "audit"},
	{"llm_gateway/prompts/", "prompt"},
	{"llm_gateway/policies/", "rate_limit_policy"},
	{"llm/usage-limits/", "usage_limit_policy"},
}

// KindOf is the kind column of key: what the record is.
func KindOf(key string) string {
	for _, k := range kinds {
		if strings.Contains(key, k.part) {
			return k.kind
		}
	}
	return "meta"
}

// upsert is Store's statement: the same in both dialects.
const upsert = `INSERT INTO llm_records (key, kind, dir, value, modified) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (key) DO UPDATE SET value = excluded.value, modified = excluded.modified`

// Store implements certmagic.Storage.
func (kv *KV) Store(ctx context.Context, key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxValue {
		return fmt.Errorf("sqlkv: a record of %d bytes exceeds %d", len(value), MaxValue)
	}
	if err := kv.Connect(ctx); err != nil {
		return err
	}
	_, err := kv.db.ExecContext(ctx, kv.bind(upsert), key, KindOf(key), dirOf(key), nonNil(value), kv.now().UnixMilli())
	return err
}

// nonNil stores an empty value as an empty blob, never NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Load implements certmagic.Storage; a missing key wraps fs.ErrNotExist.
func (kv *KV) Load(ctx context.Context, key string) ([]byte, error) {
	if err := kv.Connect(ctx); err != nil {
		return nil, err
	}
	var v []byte
	err := kv.db.QueryRowContext(ctx, kv.bind(`SELECT value FROM llm_records WHERE key = ?`), key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlkv: %s: %w", key, fs.ErrNotExist)
	}
	return v, err
}

// below returns the bounds of the keys under the folder prefix: every key
// k with lo < k < hi starts with prefix + "/" ('0' follows '/').
func below(prefix string) (lo, hi string) { return prefix + "/", prefix + "0" }

// Delete implements certmagic.Storage: the key, and every key under it as
// a folder. A missing key is not an error.
func (kv *KV) Delete(ctx context.Context, key string) error {
	if err := kv.Connect(ctx); err != nil {
		return err
	}
	lo, hi := below(key)
	_, err := kv.db.ExecContext(ctx, kv.bind(`DELETE FROM llm_records WHERE key = ? OR (key > ? AND key < ?)`), key, lo, hi)
	return err
}

// Exists implements certmagic.Storage: key is a record or a folder of some.
func (kv *KV) Exists(ctx context.Context, key string) bool {
	if err := kv.Connect(ctx); err != nil {
		return false
	}
	lo, hi := below(key)
	var n int
	err := kv.db.QueryRowContext(ctx, kv.bind(`SELECT 1 FROM llm_records WHERE key = ? OR (key > ? AND key < ?) LIMIT 1`), key, lo, hi).Scan(&n)
	return err == nil
}

// List implements certmagic.Storage: the keys of the records in the folder
// prefix (recursive: at any depth), in key order. Folders are not listed
// as entries of their own (as kvstore.Redis does): every caller loads
// what it lists. A folder holding nothing is fs.ErrNotExist, as in Caddy's
// file storage.
func (kv *KV) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if err := kv.Connect(ctx); err != nil {
		return nil, err
	}
	prefix = strings.TrimSuffix(prefix, "/")
	var rows *sql.Rows
	var err error
	if recursive {
		lo, hi := below(prefix)
		rows, err = kv.db.QueryContext(ctx, kv.bind(`SELECT key FROM llm_records WHERE key > ? AND key < ? ORDER BY key`), lo, hi)
	} else {
		rows, err = kv.db.QueryContext(ctx, kv.bind(`SELECT key FROM llm_records WHERE dir = ? ORDER BY key`), prefix)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sqlkv: %s: %w", prefix, fs.ErrNotExist)
	}
	return out, nil
}

// Scan implements kvstore.Scanner: the records of the folder prefix with
// their values, in key order, in one query.
func (kv *KV) Scan(ctx context.Context, prefix string, fn func(key string, value []byte) error) error {
	if err := kv.Connect(ctx); err != nil {
		return err
	}
	rows, err := kv.db.QueryContext(ctx, kv.bind(`SELECT key, value FROM llm_records WHERE dir = ? ORDER BY key`), strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Stat implements certmagic.Storage.
func (kv *KV) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	if err := kv.Connect(ctx); err != nil {
		return certmagic.KeyInfo{}, err
	}
	var size, modified int64
	err := kv.db.QueryRowContext(ctx, kv.bind(`SELECT LENGTH(value), modified FROM llm_records WHERE key = ?`), key).Scan(&size, &modified)
	if errors.Is(err, sql.ErrNoRows) {
		if kv.Exists(ctx, key) {
			return certmagic.KeyInfo{Key: key}, nil
		}
		return certmagic.KeyInfo{}, fmt.Errorf("sqlkv: %s: %w", key, fs.ErrNotExist)
	}
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	return certmagic.KeyInfo{Key: key, Modified: time.UnixMilli(modified), Size: size, IsTerminal: true}, nil
}

// CompareAndSwap implements kvstore.Swapper in one statement: an insert
// that does nothing when the key exists (old nil), or an update of the
// row whose value is still old.
func (kv *KV) CompareAndSwap(ctx context.Context, key string, old, value []byte) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	if len(value) > MaxValue {
		return false, fmt.Errorf("sqlkv: a record of %d bytes exceeds %d", len(value), MaxValue)
	}
	if err := kv.Connect(ctx); err != nil {
		return false, err
	}
	now := kv.now().UnixMilli()
	var res sql.Result
	var err error
	if old == nil {
		res, err = kv.db.ExecContext(ctx, kv.bind(`INSERT INTO llm_records (key, kind, dir, value, modified) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (key) DO NOTHING`), key, KindOf(key), dirOf(key), nonNil(value), now)
	} else {
		res, err = kv.db.ExecContext(ctx, kv.bind(`UPDATE llm_records SET value = ?, modified = ? WHERE key = ? AND value = ?`),
			nonNil(value), now, key, old)
	}
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

var (
	_ certmagic.Storage = (*KV)(nil)
	_ kvstore.Scanner   = (*KV)(nil)
	_ kvstore.Swapper   = (*KV)(nil)
)
