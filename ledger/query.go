package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
)

// Filter selects records. Workspace (or, for an organisation-wide view,
// Organisation) scopes every query: a query with neither is refused, so
// an API cannot forget the caller's scope.
type Filter struct {
	Workspace    string
	Organisation string
	// From and To bound the records' time: From inclusive, To exclusive.
	From, To    time.Time
	APIKeys     []string
	Models      []string
	Providers   []string
	VirtualKeys []string
	Configs     []string
	Statuses    []int
	CacheStates []string
	TraceID     string
	// ID selects one record by its store id (0: any).
	ID int64
	// Metadata holds key/value pairs a record's metadata must all have.
	Metadata map[string]string
}

// ErrNoScope is the error of a query without a workspace or organisation.
var ErrNoScope = errors.New("ledger: a query needs a workspace or organisation")

// MaxListFilter bounds the values of one list filter.
const MaxListFilter = 100

// ValidMetadataKey reports whether k may name a metadata key in a query:
// 1 to 64 letters, digits, '_', '-' or '.'.
func ValidMetadataKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// where builds the FROM and WHERE clauses of f over the records, and
// their arguments.
func (s *DB) where(f *Filter) (string, []any, error) {
	return s.whereIn(f, source{table: "llm_ledger", ts: "ts", from: f.From, to: f.To, coded: true})
}

// codedColumn is the records' column of each name a filter or grouping
// uses by its text column (the rollup's).
var codedColumn = map[string]string{"api_key": "key_d", "workspace_id": "workspace_d", "organisation_id": "organisation_d",
	"virtual_key": "virtual_key_d", "config_id": "config_d", "provider": "provider_d", "model": "model_d",
	"cache_state": "cache_state_d"}

// eq is the condition that src's column of name is the next argument.
func (src source) eq(name string) string {
	if src.coded {
		return dimEq(codedColumn[name])
	}
	return name + " = ?"
}

// in is the condition that src's column of name is one of the next n
// arguments.
func (src source) in(name string, n int) string {
	if n == 1 {
		// As an equality, one value lets the planner read an index on
		// the column in time order (one key's logs, newest first).
		return src.eq(name)
	}
	if src.coded {
		return dimIn(codedColumn[name], n)
	}
	return name + " IN (" + placeholders(n) + ")"
}

// whereIn builds the FROM and WHERE clauses of f for the part of its
// time range src reads, from src's table with its time column, and their
// arguments in the order they appear.
func (s *DB) whereIn(f *Filter, src source) (string, []any, error) {
	if !s.ready.Load() {
		return "", nil, ErrNotReady
	}
	var (
		conds []string
		args  []any
		from  = " FROM " + src.table
	)
	if f.TraceID != "" {
		// The records of a trace come from either index of trace ids
		// (tracekey.go), each through its own partial index, the hash
		// narrowing a bucket to its trace and a time range to its part.
		// They lead the join (CROSS JOIN keeps SQLite's order; PostgreSQL
		// plans it as any join): otherwise SQLite, without statistics,
		// reads every record of the scope and tests each (0.49 s for one
		// trace among 1,000,000 records, BenchmarkTraceLookup).
		h := traceHash(f.TraceID)
		sent := "SELECT id FROM llm_ledger WHERE trace_bucket = ?"
		args = append(args, f.TraceID, int64(uint64(h)%traceBuckets))
		if !f.From.IsZero() {
			sent, args = sent+" AND ts >= ?", append(args, f.From.UnixMicro())
		}
		if !f.To.IsZero() {
			sent, args = sent+" AND ts < ?", append(args, f.To.UnixMicro())
		}
		args = append(args, h, f.TraceID)
		from = " FROM (SELECT id AS traced FROM llm_ledger WHERE trace_bucket IS NULL AND trace_id = ? UNION ALL " +
			sent + " AND trace_hash = ? AND trace_id = ?) trace CROSS JOIN " + src.table
		conds = append(conds, src.table+".id = trace.traced")
	}
	switch {
	case f.Workspace != "":
		conds, args = append(conds, src.eq("workspace_id")), append(args, f.Workspace)
		if f.Organisation != "" {
			conds, args = append(conds, src.eq("organisation_id")), append(args, f.Organisation)
		}
	case f.Organisation != "":
		conds, args = append(conds, src.eq("organisation_id")), append(args, f.Organisation)
	default:
		return "", nil, ErrNoScope
	}
	if !src.from.IsZero() {
		conds, args = append(conds, src.ts+" >= ?"), append(args, src.from.UnixMicro())
	}
	if !src.to.IsZero() {
		conds, args = append(conds, src.ts+" < ?"), append(args, src.to.UnixMicro())
	}
	in := func(col string, vals []string) {
		if len(vals) == 0 {
			return
		}
		conds = append(conds, src.in(col, len(vals)))
		for _, v := range vals {
			args = append(args, v)
		}
	}
	in("api_key", f.APIKeys)
	in("model", f.Models)
	in("provider", f.Providers)
	in("virtual_key", f.VirtualKeys)
	in("config_id", f.Configs)
	in("cache_state", f.CacheStates)
	if len(f.Statuses) > 0 {
		conds = append(conds, "status IN ("+placeholders(len(f.Statuses))+")")
		for _, v := range f.Statuses {
			args = append(args, v)
		}
	}
	if f.ID != 0 {
		conds, args = append(conds, "id = ?"), append(args, f.ID)
	}
	for k, v := range f.Metadata {
		if !ValidMetadataKey(k) {
			return "", nil, errors.New("ledger: invalid metadata key")
		}
		conds = append(conds, s.d.metadataValue()+" = ?")
		args = append(args, s.d.metadataArg(k), v)
	}
	return from + " WHERE " + strings.Join(conds, " AND "), args, nil
}

// MaxLogsTotal is the most records Logs counts: past it the total is
// MaxLogsTotal and capped. An exact count reads every record the filter
// selects (766 ms of a 855 ms first page at 10,000,000 records), and a
// page needs only to know whether more follow.
const MaxLogsTotal = 10000

// Logs returns a page of the records f selects, newest first, and how
// many it selects in all, counted up to MaxLogsTotal (capped says the
// count stopped there).
func (s *DB) Logs(ctx context.Context, f *Filter, limit, offset int) (recs []Record, total int64, capped bool, err error) {
	where, args, err := s.where(f)
	if err != nil {
		return nil, 0, false, err
	}
	if err := s.db.QueryRowContext(ctx, s.d.bind(logsCountSQL(where)), append(args, MaxLogsTotal+1)...).Scan(&total); err != nil {
		return nil, 0, false, err
	}
	if total > MaxLogsTotal {
		total, capped = MaxLogsTotal, true
	}
	recs, err = s.logsPage(ctx, where, args, limit, offset)
	return recs, total, capped, err
}

// logsPage reads one page of the records a where clause selects.
func (s *DB) logsPage(ctx context.Context, where string, args []any, limit, offset int) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, s.d.bind(logsPageSQL(where)), append(args, limit, offset)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var (
			r                   Record
			ts, lat             int64
			cost                sql.NullInt64
			md, detail          string
			batch, cid, errType sql.NullString
		)
		if err := rows.Scan(&r.ID, &ts, &r.TraceID, &r.APIKey, &r.Workspace, &r.Organisation, &r.VirtualKey,
			&r.ConfigID, &r.Provider, &r.Model, &r.CacheState, &r.Status, &r.InputTokens, &r.OutputTokens,
			&cost, &lat, &errType, &md, &detail, &batch, &cid); err != nil {
			return nil, err
		}
		r.BatchID, r.CustomID, r.ErrorType = batch.String, cid.String, errType.String
		r.Time = time.UnixMicro(ts).UTC()
		r.CostNanoUSD, r.CostKnown = cost.Int64, cost.Valid
		r.Latency = time.Duration(lat) * time.Microsecond
		readDetail(&r, detail)
		if md != "{}" && md != "" {
			_ = json.Unmarshal([]byte(md), &r.Metadata)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// logsPageSQL is the query of a page of logs, newest first, of the
// records a where clause selects; its last arguments are the limit and
// offset.
func logsPageSQL(where string) string {
	return "SELECT " + logColumns + where + " ORDER BY ts DESC, llm_ledger.id DESC LIMIT ? OFFSET ?"
}

// logsCountSQL counts, up to its last argument, the records a where
// clause selects.
func logsCountSQL(where string) string {
	return "SELECT COUNT(*) FROM (SELECT 1" + where + " LIMIT ?) selected"
}

// logColumns are what a page of logs reads, in logsPage's order: the
// names through the dictionary.
var logColumns = func() string {
	names := make([]string, 0, nDims)
	for _, c := range dimColumns {
		names = append(names, dimName("llm_ledger", c))
	}
	return "llm_ledger.id, ts, trace_id, " + strings.Join(names, ", ") +
		", status, input_tokens, output_tokens, cost_nano_usd, latency_us, error_type, metadata, detail, batch_id, custom_id"
}()

// Totals are sums over a set of records.
type Totals struct {
	Requests int64
	Errors   int64
	// CostNanoUSD sums the known costs; CostUnknown counts the records
	// with usage whose cost is unknown.
	CostNanoUSD  int64
	CostUnknown  int64
	InputTokens  int64
	OutputTokens int64
	LatencyUS    int64
	SimpleHits   int64
	SemanticHits int64
	FirstSeen    int64
	LastSeen     int64
}

// aggregates are the SELECT expressions Totals scans, in order, over the
// records (the rollup's are rollupAggregates).
const aggregates = "COUNT(*), " +
	"CAST(COALESCE(SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(cost_nano_usd), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(CASE WHEN cost_nano_usd IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(latency_us), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(CASE WHEN cache_state_d = (SELECT id FROM llm_ledger_dim WHERE value = 'HIT') THEN 1 ELSE 0 END), 0) AS BIGINT), " +
	"CAST(COALESCE(SUM(CASE WHEN cache_state_d = (SELECT id FROM llm_ledger_dim WHERE value = 'SEMANTIC HIT') THEN 1 ELSE 0 END), 0) AS BIGINT), " +
	"COALESCE(MIN(ts), 0), COALESCE(MAX(ts), 0)"

func (t *Totals) dest() []any {
	return []any{&t.Requests, &t.Errors, &t.CostNanoUSD, &t.CostUnknown, &t.InputTokens, &t.OutputTokens,
		&t.LatencyUS, &t.SimpleHits, &t.SemanticHits, &t.FirstSeen, &t.LastSeen}
}

// Point is one time bucket of a series.
type Point struct {
	Start time.Time
	Totals
}

// Series returns the totals of the records f selects per bucket of the
// given length (buckets aligned to the Unix epoch, empty ones left out),
// oldest first, and over all of them. Whole hours are read from the
// rollup when the bucket is whole hours.
func (s *DB) Series(ctx context.Context, f *Filter, bucket time.Duration) ([]Point, Totals, error) {
	var all Totals
	b := max(bucket.Microseconds(), 1)
	byStart := make(map[int64]*Point)
	for _, src := range sources(f, bucket) {
		where, args, err := s.whereIn(f, src)
		if err != nil {
			return nil, all, err
		}
		q := "SELECT (" + src.ts + " / ?) * ?, " + src.aggregates + where + " GROUP BY 1"
		rows, err := s.db.QueryContext(ctx, s.d.bind(q), append([]any{b, b}, args...)...)
		if err != nil {
			return nil, all, err
		}
		for rows.Next() {
			var (
				t     Totals
				start int64
			)
			if err := rows.Scan(append([]any{&start}, t.dest()...)...); err != nil {
				rows.Close()
				return nil, all, err
			}
			if t.Requests == 0 {
				continue
			}
			p := byStart[start]
			if p == nil {
				p = &Point{Start: time.UnixMicro(start).UTC()}
				byStart[start] = p
			}
			p.add(&t)
			all.add(&t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, all, err
		}
	}
	out := make([]Point, 0, len(byStart))
	for _, p := range byStart {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Point) int { return a.Start.Compare(b.Start) })
	return out, all, nil
}

func (t *Totals) add(o *Totals) {
	if t.Requests == 0 || (o.FirstSeen != 0 && o.FirstSeen < t.FirstSeen) {
		t.FirstSeen = o.FirstSeen
	}
	t.LastSeen = max(t.LastSeen, o.LastSeen)
	t.Requests += o.Requests
	t.Errors += o.Errors
	t.CostNanoUSD += o.CostNanoUSD
	t.CostUnknown += o.CostUnknown
	t.InputTokens += o.InputTokens
	t.OutputTokens += o.OutputTokens
	t.LatencyUS += o.LatencyUS
	t.SimpleHits += o.SimpleHits
	t.SemanticHits += o.SemanticHits
}

// Group is the totals of the records sharing one value of a grouping.
type Group struct {
	Value string
	Totals
}

// Grouping columns Groups accepts.
const (
	ByModel     = "model"
	ByAPIKey    = "api_key"
	ByWorkspace = "workspace_id"
	ByProvider  = "provider"
	ByConfig    = "config_id"
	ByVirtual   = "virtual_key"
	ByStatus    = "status"
)

// Groups returns a page of the totals per value of column by (one of
// the By constants) or, when metaKey is set, of that metadata key, most
// requests first, and how many groups there are.
func (s *DB) Groups(ctx context.Context, f *Filter, by, metaKey string, limit, offset int) ([]Group, int64, error) {
	if metaKey != "" {
		return s.metadataGroups(ctx, f, metaKey, limit, offset)
	}
	switch by {
	case ByStatus, ByModel, ByAPIKey, ByWorkspace, ByProvider, ByConfig, ByVirtual:
	default:
		return nil, 0, errors.New("ledger: unknown grouping")
	}
	// The grouped columns are bounded by configuration (keys, models in
	// use), so every group is gathered and the page cut here.
	byValue := make(map[string]*Group)
	for _, src := range sources(f, rollupHour) {
		where, args, err := s.whereIn(f, src)
		if err != nil {
			return nil, 0, err
		}
		// The records group by the name's number, read through the
		// dictionary once a group; the rollup by the name itself.
		expr, group := by, "1"
		switch {
		case by == ByStatus:
			expr = "CAST(status AS TEXT)"
		case src.coded:
			expr, group = dimName(src.table, codedColumn[by]), src.table+"."+codedColumn[by]
		}
		q := "SELECT " + expr + ", " + src.aggregates + where + " GROUP BY " + group
		rows, err := s.db.QueryContext(ctx, s.d.bind(q), args...)
		if err != nil {
			return nil, 0, err
		}
		for rows.Next() {
			var (
				t Totals
				v string
			)
			if err := rows.Scan(append([]any{&v}, t.dest()...)...); err != nil {
				rows.Close()
				return nil, 0, err
			}
			if t.Requests == 0 {
				continue
			}
			g := byValue[v]
			if g == nil {
				g = &Group{Value: v}
				byValue[v] = g
			}
			g.add(&t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, 0, err
		}
	}
	all := make([]Group, 0, len(byValue))
	for _, g := range byValue {
		all = append(all, *g)
	}
	slices.SortFunc(all, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Value, b.Value))
	})
	total := int64(len(all))
	if offset >= len(all) {
		return nil, total, nil
	}
	return all[offset:min(offset+limit, len(all))], total, nil
}

// metadataGroups is Groups by a metadata key, whose values are as many as
// clients send: the database pages them.
func (s *DB) metadataGroups(ctx context.Context, f *Filter, metaKey string, limit, offset int) ([]Group, int64, error) {
	if !ValidMetadataKey(metaKey) {
		return nil, 0, errors.New("ledger: invalid metadata key")
	}
	where, args, err := s.where(f)
	if err != nil {
		return nil, 0, err
	}
	expr := "COALESCE(" + s.d.metadataValue() + ", '')"
	pre := []any{s.d.metadataArg(metaKey)}
	var total int64
	cq := "SELECT COUNT(*) FROM (SELECT " + expr + where + " GROUP BY 1) g"
	if err := s.db.QueryRowContext(ctx, s.d.bind(cq), append(pre, args...)...).Scan(&total); err != nil {
		return nil, 0, err
	}
	q := "SELECT " + expr + ", " + aggregates + where + " GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ? OFFSET ?"
	all := append(append(append([]any{}, pre...), args...), limit, offset)
	rows, err := s.db.QueryContext(ctx, s.d.bind(q), all...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		var g Group
		if err := rows.Scan(append([]any{&g.Value}, g.dest()...)...); err != nil {
			return nil, 0, err
		}
		out = append(out, g)
	}
	return out, total, rows.Err()
}

// LatencyBins returns, per bucket start, how many records f selects fall
// in each latency bin: a latency in microseconds kept to its first two
// significant digits (so percentiles read from the bins are within 10%
// of the exact ones, computed by the database without moving a row per
// record to the gateway).
func (s *DB) LatencyBins(ctx context.Context, f *Filter, bucket time.Duration) (map[int64]map[int64]int64, error) {
	where, args, err := s.where(f)
	if err != nil {
		return nil, err
	}
	b := max(bucket.Microseconds(), 1)
	q := "SELECT (ts / ?) * ?, LENGTH(CAST(latency_us AS TEXT)), SUBSTR(CAST(latency_us AS TEXT), 1, 2), COUNT(*)" +
		where + " GROUP BY 1, 2, 3"
	rows, err := s.db.QueryContext(ctx, s.d.bind(q), append([]any{b, b}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]map[int64]int64)
	for rows.Next() {
		var (
			start, digits, n int64
			prefix           string
		)
		if err := rows.Scan(&start, &digits, &prefix, &n); err != nil {
			return nil, err
		}
		v := int64(0)
		for _, c := range prefix {
			v = v*10 + int64(c-'0')
		}
		for i := int64(len(prefix)); i < digits; i++ {
			v *= 10
		}
		m := out[start]
		if m == nil {
			m = make(map[int64]int64)
			out[start] = m
		}
		m[v] += n
	}
	return out, rows.Err()
}
