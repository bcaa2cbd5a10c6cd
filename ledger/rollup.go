package ledger

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
)

// The rollup: per hour, per combination of the columns analytics filter
// and group by (not metadata or trace id), the sums of the records. It
// is updated in the transaction that inserts the records, so it always
// agrees with them; series and groups over whole hours read it instead
// of every record, which keeps a month of a million records to a few
// thousand rows.

// rollupHour is the rollup's bucket.
const rollupHour = time.Hour

// rollupKey is one rollup row's identity.
type rollupKey struct {
	hour                                                int64
	workspace, organisation, apiKey, virtualKey, config string
	provider, model, cacheState                         string
	status                                              int
}

// rollupSums are one rollup row's sums.
type rollupSums struct {
	requests, cost, costUnknown, input, output, latency, first, last int64
}

const rollupKeyColumns = "hour, workspace_id, organisation_id, api_key, virtual_key, config_id, provider, model, cache_state, status"

const rollupColumns = rollupKeyColumns + ", requests, cost_nano_usd, cost_unknown, input_tokens, output_tokens, latency_us, first_ts, last_ts"

// rollupMigration creates the rollup (a step of migrations).
const rollupMigration = `CREATE TABLE IF NOT EXISTS llm_ledger_rollup (
		hour BIGINT NOT NULL,
		workspace_id TEXT NOT NULL,
		organisation_id TEXT NOT NULL,
		api_key TEXT NOT NULL,
		virtual_key TEXT NOT NULL,
		config_id TEXT NOT NULL,
		provider TEXT NOT NULL,
		model TEXT NOT NULL,
		cache_state TEXT NOT NULL,
		status INTEGER NOT NULL,
		requests BIGINT NOT NULL,
		cost_nano_usd BIGINT NOT NULL,
		cost_unknown BIGINT NOT NULL,
		input_tokens BIGINT NOT NULL,
		output_tokens BIGINT NOT NULL,
		latency_us BIGINT NOT NULL,
		first_ts BIGINT NOT NULL,
		last_ts BIGINT NOT NULL
	);
	CREATE UNIQUE INDEX IF NOT EXISTS llm_ledger_rollup_key ON llm_ledger_rollup (` + rollupKeyColumns + `);
	CREATE INDEX IF NOT EXISTS llm_ledger_rollup_org ON llm_ledger_rollup (organisation_id, hour)`

// upsertRollup adds recs to the rollup within w. Rows are written in
// key order, so concurrent writers (a cluster's instances) lock them in
// the same order and cannot deadlock.
func (s *DB) upsertRollup(ctx context.Context, w txWriter, recs []Record) error {
	sums := make(map[rollupKey]*rollupSums)
	hourUS := rollupHour.Microseconds()
	for i := range recs {
		r := &recs[i]
		ts := r.Time.UnixMicro()
		k := rollupKey{ts - mod(ts, hourUS), r.Workspace, r.Organisation, r.APIKey, r.VirtualKey, r.ConfigID,
			r.Provider, r.Model, r.CacheState, r.Status}
		v := sums[k]
		if v == nil {
			v = &rollupSums{first: ts, last: ts}
			sums[k] = v
		}
		v.requests++
		if r.CostKnown {
			v.cost += r.CostNanoUSD
		} else {
			v.costUnknown++
		}
		v.input += r.InputTokens
		v.output += r.OutputTokens
		v.latency += r.Latency.Microseconds()
		v.first, v.last = min(v.first, ts), max(v.last, ts)
	}
	keys := make([]rollupKey, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return execChunked(ctx, w, stmtRollup, len(keys), 18, func(args []any, i int) []any {
		k := keys[i]
		v := sums[k]
		return append(args, k.hour, k.workspace, k.organisation, k.apiKey, k.virtualKey, k.config, k.provider,
			k.model, k.cacheState, int64(k.status), v.requests, v.cost, v.costUnknown, v.input, v.output, v.latency, v.first, v.last)
	})
}

// rollupSQL is the rollup's upsert of rows keys.
func (s *DB) rollupSQL(rows int) string {
	least, greatest := "MIN", "MAX"
	if s.d.postgres {
		least, greatest = "LEAST", "GREATEST"
	}
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return "INSERT INTO llm_ledger_rollup (" + rollupColumns + ") VALUES " +
		strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ") +
		" ON CONFLICT (" + rollupKeyColumns + ") DO UPDATE SET " +
		"requests = llm_ledger_rollup.requests + excluded.requests, " +
		"cost_nano_usd = llm_ledger_rollup.cost_nano_usd + excluded.cost_nano_usd, " +
		"cost_unknown = llm_ledger_rollup.cost_unknown + excluded.cost_unknown, " +
		"input_tokens = llm_ledger_rollup.input_tokens + excluded.input_tokens, " +
		"output_tokens = llm_ledger_rollup.output_tokens + excluded.output_tokens, " +
		"latency_us = llm_ledger_rollup.latency_us + excluded.latency_us, " +
		"first_ts = " + least + "(llm_ledger_rollup.first_ts, excluded.first_ts), " +
		"last_ts = " + greatest + "(llm_ledger_rollup.last_ts, excluded.last_ts)"
}

func compareKeys(a, b rollupKey) int {
	return cmp.Or(cmp.Compare(a.hour, b.hour), cmp.Compare(a.workspace, b.workspace),
		cmp.Compare(a.organisation, b.organisation), cmp.Compare(a.apiKey, b.apiKey),
		cmp.Compare(a.virtualKey, b.virtualKey), cmp.Compare(a.config, b.config),
		cmp.Compare(a.provider, b.provider), cmp.Compare(a.model, b.model),
		cmp.Compare(a.cacheState, b.cacheState), cmp.Compare(a.status, b.status))
}

// mod is the non-negative remainder of a by b.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// rollupAggregates are aggregates (query.go) read from the rollup.
const rollupAggregates = "CAST(COALESCE(SUM(requests), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(CASE WHEN status >= 400 THEN requests ELSE 0 END), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(cost_nano_usd), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(cost_unknown), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(latency_us), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(CASE WHEN cache_state = 'HIT' THEN requests ELSE 0 END), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(CASE WHEN cache_state = 'SEMANTIC HIT' THEN requests ELSE 0 END), 0) AS BIGINT), " +
	"COALESCE(MIN(first_ts), 0), COALESCE(MAX(last_ts), 0)"

// source is one table a query reads part of its time range from.
type source struct {
	table, ts, aggregates string
	from, to              time.Time
	// coded is set for the records, whose names are dictionary ids;
	// the rollup keeps the names.
	coded bool
}

// sources splits f's time range for a query by the given bucket: the
// whole hours in the middle from the rollup, the partial hours at either
// end from the records. Filters the rollup cannot answer (trace id,
// metadata), or a bucket that is not whole hours, read every record.
func sources(f *Filter, bucket time.Duration) []source {
	raw := source{table: "llm_ledger", ts: "ts", aggregates: aggregates, from: f.From, to: f.To, coded: true}
	if f.TraceID != "" || f.ID != 0 || len(f.Metadata) > 0 || bucket%rollupHour != 0 {
		return []source{raw}
	}
	lo, hi := f.From, f.To
	if !lo.IsZero() {
		lo = lo.Truncate(rollupHour)
		if lo.Before(f.From) {
			lo = lo.Add(rollupHour)
		}
	}
	if !hi.IsZero() {
		hi = hi.Truncate(rollupHour)
	}
	if !lo.IsZero() && !hi.IsZero() && !lo.Before(hi) {
		return []source{raw}
	}
	out := []source{{table: "llm_ledger_rollup", ts: "hour", aggregates: rollupAggregates, from: lo, to: hi}}
	if !lo.IsZero() && lo.After(f.From) {
		head := raw
		head.to = lo
		out = append(out, head)
	}
	if !hi.IsZero() && hi.Before(f.To) {
		tail := raw
		tail.from = hi
		out = append(out, tail)
	}
	return out
}
