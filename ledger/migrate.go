package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// migrations are the schema's steps, applied in order, each once, by
// the gateway itself when it opens the database (no separate migration
// job). A step is written once for both databases; {id} is the
// dialect's auto-numbered key column. Never edit a released step: add
// one.
var migrations = []string{
	// 1: the ledger.
	`CREATE TABLE IF NOT EXISTS llm_ledger (
		id {id},
		ts BIGINT NOT NULL,
		trace_id TEXT NOT NULL,
		api_key TEXT NOT NULL,
		workspace_id TEXT NOT NULL,
		organisation_id TEXT NOT NULL,
		virtual_key TEXT NOT NULL,
		config_id TEXT NOT NULL,
		provider TEXT NOT NULL,
		model TEXT NOT NULL,
		operation TEXT NOT NULL,
		status INTEGER NOT NULL,
		stream SMALLINT NOT NULL,
		input_tokens BIGINT NOT NULL,
		output_tokens BIGINT NOT NULL,
		cached_tokens BIGINT NOT NULL,
		cache_write_tokens BIGINT NOT NULL,
		reasoning_tokens BIGINT NOT NULL,
		cost_nano_usd BIGINT,
		latency_us BIGINT NOT NULL,
		ttft_us BIGINT,
		cache_state TEXT NOT NULL,
		retries INTEGER NOT NULL,
		metadata TEXT NOT NULL
	);
	CREATE INDEX IF NOT EXISTS llm_ledger_workspace_ts ON llm_ledger (workspace_id, ts);
	CREATE INDEX IF NOT EXISTS llm_ledger_org_ts ON llm_ledger (organisation_id, ts);
	CREATE INDEX IF NOT EXISTS llm_ledger_ts ON llm_ledger (ts);
	CREATE INDEX IF NOT EXISTS llm_ledger_trace ON llm_ledger (trace_id)`,
	// 2: the hourly rollup (rollup.go).
	rollupMigration,
	// 3: batch lines (one record per batch id and custom_id: NULLs, the
	// other requests, are distinct in both databases' unique indexes)
	// and estimated usage.
	`ALTER TABLE llm_ledger ADD COLUMN batch_id TEXT;
	ALTER TABLE llm_ledger ADD COLUMN custom_id TEXT;
	ALTER TABLE llm_ledger ADD COLUMN estimated SMALLINT NOT NULL DEFAULT 0;
	CREATE UNIQUE INDEX IF NOT EXISTS llm_ledger_batch_line ON llm_ledger (batch_id, custom_id)`,
	// 4: the logs of one key, and of a workspace key (whose filter names
	// its organisation too), newest first without reading every record
	// of the organisation or workspace: at 10,000,000 records one key's
	// first page took 2.8–5 s with the step-1 indexes, 5 ms with these.
	// Every index is written on every insert, the writer's main cost, so
	// the workspace index gives way to the one with the organisation
	// (its prefix serves a workspace alone), and the batch line key
	// holds batch lines only instead of a NULL pair for every request.
	`CREATE INDEX IF NOT EXISTS llm_ledger_org_key_ts ON llm_ledger (organisation_id, api_key, ts);
	CREATE INDEX IF NOT EXISTS llm_ledger_ws_org_ts ON llm_ledger (workspace_id, organisation_id, ts);
	DROP INDEX IF EXISTS llm_ledger_workspace_ts;
	CREATE UNIQUE INDEX IF NOT EXISTS llm_ledger_batch_line_once ON llm_ledger (batch_id, custom_id) WHERE batch_id IS NOT NULL;
	DROP INDEX IF EXISTS llm_ledger_batch_line`,
	// 5: trace ids a client sent are indexed by bucket, time and hash
	// instead of by their text, which put each insert on a random page
	// (tracekey.go); the records written before keep NULL buckets and stay
	// in the text index.
	`ALTER TABLE llm_ledger ADD COLUMN trace_bucket SMALLINT;
	ALTER TABLE llm_ledger ADD COLUMN trace_hash BIGINT;
	CREATE INDEX IF NOT EXISTS llm_ledger_trace_made ON llm_ledger (trace_id) WHERE trace_bucket IS NULL;
	CREATE INDEX IF NOT EXISTS llm_ledger_trace_sent ON llm_ledger (trace_bucket, ts, trace_hash) WHERE trace_bucket IS NOT NULL;
	DROP INDEX IF EXISTS llm_ledger_trace`,
	// 6: how far each spool segment has been written (spoolstore.go),
	// committed in the transaction of its records, so a segment replayed
	// again after a crash skips what is already in.
	`CREATE TABLE IF NOT EXISTS llm_ledger_spool (
		segment TEXT PRIMARY KEY,
		seq BIGINT NOT NULL,
		updated_at BIGINT NOT NULL
	)`,
	// 7: no index on time alone. It served only the hourly retention
	// sweep, which finds the expired records organisation by
	// organisation through llm_ledger_org_ts instead (Sweep), and every
	// insert paid for it: 0.8–1.2 µs of the embedded writer's CPU a
	// record at 1,000,000 records (BenchmarkInsertGatewayShaped).
	`DROP INDEX IF EXISTS llm_ledger_ts`,
	// 8: narrow records (dims.go). Each name a record carries (key,
	// workspace, organisation, virtual key, config, provider, model,
	// cache state) is a number of the dictionary llm_ledger_dim, so rows
	// and the indexes on them hold integers; the columns no query filters
	// or sums by (operation, stream, cached, cache-write and reasoning
	// tokens, time to first token, retries, estimated) are one JSON
	// object, detail; error_type is new. The embedded writer's CPU a
	// record at 1,000,000 records fell by about half
	// (BenchmarkInsertGatewayShaped, docs/performance.md). The records
	// written before are copied into the new table once, here, keeping
	// their ids, then the old table is dropped.
	migrationNarrow,
}

// migrationNarrow is step 8. Its {pg} statements run on PostgreSQL only;
// the ids of copied records are kept, so the identity (PostgreSQL)
// restarts above them; SQLite's rowid continues from the largest.
const migrationNarrow = `CREATE TABLE IF NOT EXISTS llm_ledger_dim (
		id {id},
		value TEXT NOT NULL
	);
	CREATE UNIQUE INDEX IF NOT EXISTS llm_ledger_dim_value ON llm_ledger_dim (value);
	ALTER TABLE llm_ledger RENAME TO llm_ledger_v1;
	{pg}ALTER TABLE llm_ledger_v1 RENAME CONSTRAINT llm_ledger_pkey TO llm_ledger_v1_pkey;
	DROP INDEX IF EXISTS llm_ledger_org_key_ts;
	DROP INDEX IF EXISTS llm_ledger_ws_org_ts;
	DROP INDEX IF EXISTS llm_ledger_org_ts;
	DROP INDEX IF EXISTS llm_ledger_trace_made;
	DROP INDEX IF EXISTS llm_ledger_trace_sent;
	DROP INDEX IF EXISTS llm_ledger_batch_line_once;
	CREATE TABLE llm_ledger (
		id {id},
		ts BIGINT NOT NULL,
		trace_id TEXT NOT NULL,
		key_d BIGINT NOT NULL,
		workspace_d BIGINT NOT NULL,
		organisation_d BIGINT NOT NULL,
		virtual_key_d BIGINT NOT NULL,
		config_d BIGINT NOT NULL,
		provider_d BIGINT NOT NULL,
		model_d BIGINT NOT NULL,
		cache_state_d BIGINT NOT NULL,
		status INTEGER NOT NULL,
		input_tokens BIGINT NOT NULL,
		output_tokens BIGINT NOT NULL,
		cost_nano_usd BIGINT,
		latency_us BIGINT NOT NULL,
		error_type TEXT,
		metadata TEXT NOT NULL,
		detail TEXT NOT NULL,
		batch_id TEXT,
		custom_id TEXT,
		trace_bucket SMALLINT,
		trace_hash BIGINT
	);
	INSERT INTO llm_ledger_dim (value)
		SELECT api_key FROM llm_ledger_v1 UNION SELECT workspace_id FROM llm_ledger_v1
		UNION SELECT organisation_id FROM llm_ledger_v1 UNION SELECT virtual_key FROM llm_ledger_v1
		UNION SELECT config_id FROM llm_ledger_v1 UNION SELECT provider FROM llm_ledger_v1
		UNION SELECT model FROM llm_ledger_v1 UNION SELECT cache_state FROM llm_ledger_v1;
	INSERT INTO llm_ledger (id, ts, trace_id, key_d, workspace_d, organisation_d, virtual_key_d, config_d,
		provider_d, model_d, cache_state_d, status, input_tokens, output_tokens, cost_nano_usd, latency_us,
		error_type, metadata, detail, batch_id, custom_id, trace_bucket, trace_hash) {override}
		SELECT o.id, o.ts, o.trace_id,
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.api_key),
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.workspace_id),
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.organisation_id),
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.virtual_key),
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.config_id),
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.provider),
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.model),
			(SELECT d.id FROM llm_ledger_dim d WHERE d.value = o.cache_state),
			o.status, o.input_tokens, o.output_tokens, o.cost_nano_usd, o.latency_us, NULL, o.metadata,
			{json_object}('op', o.operation, 'stream', o.stream, 'cached', o.cached_tokens,
				'cache_write', o.cache_write_tokens, 'reasoning', o.reasoning_tokens, 'ttft_us', o.ttft_us,
				'retries', o.retries, 'estimated', o.estimated){as_text},
			o.batch_id, o.custom_id, o.trace_bucket, o.trace_hash
		FROM llm_ledger_v1 o ORDER BY o.id;
	{pg}SELECT setval(pg_get_serial_sequence('llm_ledger', 'id'), (SELECT COALESCE(MAX(id), 0) + 1 FROM llm_ledger), false);
	DROP TABLE llm_ledger_v1;
	CREATE INDEX llm_ledger_org_key_ts ON llm_ledger (organisation_d, key_d, ts);
	CREATE INDEX llm_ledger_ws_org_ts ON llm_ledger (workspace_d, organisation_d, ts);
	CREATE INDEX llm_ledger_org_ts ON llm_ledger (organisation_d, ts);
	CREATE INDEX llm_ledger_trace_made ON llm_ledger (trace_id) WHERE trace_bucket IS NULL;
	CREATE INDEX llm_ledger_trace_sent ON llm_ledger (trace_bucket, ts, trace_hash) WHERE trace_bucket IS NOT NULL;
	CREATE UNIQUE INDEX llm_ledger_batch_line_once ON llm_ledger (batch_id, custom_id) WHERE batch_id IS NOT NULL`

// migrateTimeout bounds applying the steps, once the database is reached.
const migrateTimeout = 30 * time.Minute

// advisoryLock is the PostgreSQL advisory lock key migrations hold, so
// instances starting together apply each step once ("llmledgr").
const advisoryLock = 0x6c6c6d6c65646772

// migrate applies the steps the database has not seen, inside one
// transaction holding the schema lock: PostgreSQL's transaction-scoped
// advisory lock, SQLite's write lock (BEGIN IMMEDIATE, the store's
// transaction mode).
//
// The database is reached within ctx, but the steps run on their own
// clock (migrateTimeout): step 8 copies every record once, which at
// millions of records outlasts the bound a start puts on reaching the
// database, and a migration cut short would start over next time.
func (s *DB) migrate(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), migrateTimeout)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if s.d.postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(advisoryLock)); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS llm_ledger_schema (version INTEGER NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	var version int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM llm_ledger_schema").Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("the database's schema is version %d, newer than this gateway's %d", version, len(migrations))
	}
	for v := version + 1; v <= len(migrations); v++ {
		if err := execAll(ctx, tx, s.d.migrationSQL(migrations[v-1]), s.d.postgres); err != nil {
			return fmt.Errorf("step %d: %v", v, err)
		}
		if _, err := tx.ExecContext(ctx, s.d.bind("INSERT INTO llm_ledger_schema (version, applied_at) VALUES (?, ?)"), v, time.Now().Unix()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// migrationSQL is a step written for both databases in the dialect's
// words: {id} is the auto-numbered key column, {override} what lets an
// INSERT give that column its values, {json_object} and {as_text} make a
// JSON object as text.
func (d dialect) migrationSQL(step string) string {
	words := []string{"{id}", "INTEGER PRIMARY KEY", "{override}", "", "{json_object}", "json_object", "{as_text}", ""}
	if d.postgres {
		words = []string{"{id}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "{override}", "OVERRIDING SYSTEM VALUE",
			"{json_object}", "json_build_object", "{as_text}", "::text"}
	}
	return strings.NewReplacer(words...).Replace(step)
}

// execAll runs each ;-separated statement of a step (the steps hold no
// literal semicolons); one marked {pg} runs on PostgreSQL only.
func execAll(ctx context.Context, tx *sql.Tx, step string, postgres bool) error {
	for _, stmt := range strings.Split(step, ";") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(stmt, "{pg}"); ok {
			if !postgres {
				continue
			}
			stmt = rest
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}
