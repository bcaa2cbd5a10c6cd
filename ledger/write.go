package ledger

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// The writer's transactions. SQLite is written through database/sql's
// transaction and statements prepared once (stmts.go); PostgreSQL
// through pgx's own transaction on a connection of the pool, which can
// COPY the records in (binary, no statement of thousands of parameters
// to encode and parse): the gateway's CPU a record fell from 10.5–11.9
// to 2.3–2.5 µs, the server's from 26–27 to 11–13 µs, at 1,000,000
// records (BenchmarkInsertGatewayShaped/postgres).

// txWriter is one transaction of the writer.
type txWriter interface {
	// exec runs the writer's statement of kind for rows rows with args
	// and returns how many rows it changed.
	exec(ctx context.Context, kind stmtKind, rows int, args []any) (int64, error)
	// execSQL runs a statement written with ? placeholders.
	execSQL(ctx context.Context, q string, args ...any) error
	// query runs a statement written with ? placeholders that answers
	// rows of an id and a text, calling row for each.
	query(ctx context.Context, q string, args []any, row func(id int64, v string)) error
	// bulk inserts records that are not batch lines.
	bulk(ctx context.Context, recs []Record) error
	// dims are the dictionary ids of the transaction's records (resolve).
	dims() *batchDims
}

// write runs f in one transaction of the writer, committed when f
// returns nil.
// Dictionary entries the transaction added are cached once it commits.
func (s *DB) write(ctx context.Context, f func(w txWriter) error) error {
	var (
		d   batchDims
		err error
	)
	if s.d.postgres {
		err = s.writePostgres(ctx, &d, f)
	} else {
		err = s.writeSQLite(ctx, &d, f)
	}
	if err == nil {
		s.dims.learn(d.fresh)
	}
	return err
}

// writeSQLite runs f in a transaction on the writer's own connection
// (prepare), which keeps the writer's statements prepared and its page
// cache, the indexes' last pages, warm whatever the readers do; wmu
// makes the writer and the keeper take it in turn.
func (s *DB) writeSQLite(ctx context.Context, d *batchDims, f func(w txWriter) error) error {
	var (
		tx  *sql.Tx
		err error
	)
	if s.wconn != nil {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		tx, err = s.wconn.BeginTx(ctx, nil)
	} else {
		tx, err = s.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := f(sqlTx{s, tx, d}); err != nil {
		return err
	}
	return tx.Commit()
}

// writePostgres runs f in a pgx transaction on a connection of the pool.
// A connection the transaction broke is closed by pgx, and the pool
// drops it (stdlib.Conn's IsValid).
func (s *DB) writePostgres(ctx context.Context, d *batchDims, f func(w txWriter) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("ledger: the PostgreSQL connection is not pgx's")
		}
		tx, err := c.Conn().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
		if err := f(pgTx{s, tx, d}); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// sqlTx is a database/sql transaction (SQLite).
type sqlTx struct {
	s  *DB
	tx *sql.Tx
	d  *batchDims
}

func (t sqlTx) dims() *batchDims { return t.d }

func (t sqlTx) query(ctx context.Context, q string, args []any, row func(id int64, v string)) error {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return scanDims(rows, row)
}

func (t sqlTx) exec(ctx context.Context, kind stmtKind, rows int, args []any) (int64, error) {
	st, err := t.s.stmt(ctx, t.tx, kind, rows)
	if err != nil {
		return 0, err
	}
	res, err := st.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	if kind != stmtInsertLine {
		// Only a batch line's insert is asked how many rows it wrote.
		return 0, nil
	}
	return res.RowsAffected()
}

func (t sqlTx) execSQL(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

func (t sqlTx) bulk(ctx context.Context, recs []Record) error {
	var buf []byte
	return execChunked(ctx, t, stmtInsert, len(recs), nBulkColumns+nInsertColumns, func(args []any, i int) []any {
		return appendArgs(args, &recs[i], false, t.d, &buf)
	})
}

// resultRows is what database/sql's and pgx's result sets share.
type resultRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanDims hands each (id, value) row of a dictionary query to row.
func scanDims(rs resultRows, row func(id int64, v string)) error {
	for rs.Next() {
		var (
			id int64
			v  string
		)
		if err := rs.Scan(&id, &v); err != nil {
			return err
		}
		row(id, v)
	}
	return rs.Err()
}

// pgTx is a pgx transaction (PostgreSQL). pgx prepares each statement
// once per connection and keeps it (its statement cache).
type pgTx struct {
	s  *DB
	tx pgx.Tx
	d  *batchDims
}

func (t pgTx) dims() *batchDims { return t.d }

func (t pgTx) query(ctx context.Context, q string, args []any, row func(id int64, v string)) error {
	rows, err := t.tx.Query(ctx, t.s.d.bind(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return scanDims(rows, row)
}

func (t pgTx) exec(ctx context.Context, kind stmtKind, rows int, args []any) (int64, error) {
	tag, err := t.tx.Exec(ctx, t.s.stmtText(stmtKey{kind, rows}), args...)
	return tag.RowsAffected(), err
}

func (t pgTx) execSQL(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.Exec(ctx, t.s.d.bind(q), args...)
	return err
}

// copyColumns are the columns bulk copies, in appendArgs' order.
var copyColumns = strings.Split(bulkColumns+insertColumns, ", ")

func (t pgTx) bulk(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	src := &recordSource{recs: recs, i: -1, args: make([]any, 0, nBulkColumns+nInsertColumns), d: t.d}
	_, err := t.tx.CopyFrom(ctx, pgx.Identifier{"llm_ledger"}, copyColumns, src)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "57014" && strings.HasPrefix(pe.Message, "COPY from stdin failed") {
		// pgx could not encode a value (out of its column's range): it
		// ends the COPY with the reason, which the server answers as a
		// cancellation, a class the writer takes for the database
		// failing. As an INSERT's, this error is of no type, so the
		// batch is retried record by record once the database answers
		// a ping (refusedForData); the server's message quotes the
		// value, and is left out.
		return errCopyEncode
	}
	return err
}

// errCopyEncode is a COPY ended because pgx could not encode a value.
var errCopyEncode = errors.New("ledger: a record's value could not be encoded for PostgreSQL")

// recordSource is recs as a pgx.CopyFromSource.
type recordSource struct {
	recs []Record
	i    int
	args []any
	d    *batchDims
	buf  []byte
}

func (r *recordSource) Next() bool { r.i++; return r.i < len(r.recs) }

// Values reuses one slice: pgx encodes a row before asking for the next.
func (r *recordSource) Values() ([]any, error) {
	r.args = appendArgs(r.args[:0], &r.recs[r.i], false, r.d, &r.buf)
	return r.args, nil
}

func (r *recordSource) Err() error { return nil }

// Insert implements Store. It replaces what PostgreSQL's text cannot
// hold in recs' text, in place, on both databases (cleanRecord).
func (s *DB) Insert(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if !s.ready.Load() {
		return ErrNotReady
	}
	for i := range recs {
		cleanRecord(&recs[i])
	}
	return s.write(ctx, func(w txWriter) error { return s.insertTx(ctx, w, recs) })
}

// insertTx writes recs and their rollup within w.
func (s *DB) insertTx(ctx context.Context, w txWriter, recs []Record) error {
	if err := s.resolve(ctx, w, recs, w.dims()); err != nil {
		return err
	}
	recs, rolled, err := s.insertLines(ctx, w, recs)
	if err != nil {
		return err
	}
	if err := w.bulk(ctx, recs); err != nil {
		return err
	}
	return s.upsertRollup(ctx, w, rolled)
}

// insertLines writes the records of batch lines in recs one by one,
// each ignored when the ledger already holds a record of its line (a
// line run twice after another instance took its batch over, whose
// duplicate run's claim was lost). It returns the other records, for the
// bulk insert, and those followed by the line records written, for the
// rollup (one upsert, in key order). recs itself is left as it is;
// without batch lines both are recs.
func (s *DB) insertLines(ctx context.Context, w txWriter, recs []Record) (bulk, rolled []Record, err error) {
	n := 0
	for i := range recs {
		if recs[i].BatchID != "" {
			n++
		}
	}
	if n == 0 {
		return recs, recs, nil
	}
	rolled = make([]Record, 0, len(recs))
	for i := range recs {
		if recs[i].BatchID == "" {
			rolled = append(rolled, recs[i])
		}
	}
	plain := len(rolled)
	args := make([]any, 0, nColumns+nInsertColumns)
	var buf []byte
	for i := range recs {
		r := &recs[i]
		if r.BatchID == "" {
			continue
		}
		added, err := w.exec(ctx, stmtInsertLine, 1, appendArgs(args[:0], r, true, w.dims(), &buf))
		if err != nil {
			return nil, nil, err
		}
		if added == 1 {
			rolled = append(rolled, *r)
		}
	}
	return rolled[:plain:plain], rolled, nil
}

// insertSQL is an INSERT of rows records, batch lines (all columns) or
// others (bulkColumns).
func insertSQL(rows int, lines bool) string {
	cols, n := bulkColumns+insertColumns, nBulkColumns+nInsertColumns
	if lines {
		cols, n = columns+insertColumns, nColumns+nInsertColumns
	}
	var b strings.Builder
	b.WriteString("INSERT INTO llm_ledger (" + cols + ") VALUES ")
	row := "(" + strings.Repeat("?, ", n-1) + "?)"
	for i := 0; i < rows; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// appendArgs appends r's values in the order of columns (a batch line)
// or bulkColumns, then insertColumns, its names coded by d; buf is
// scratch space for its JSON.
func appendArgs(args []any, r *Record, line bool, d *batchDims, buf *[]byte) []any {
	var cost, errType any
	if r.CostKnown {
		cost = r.CostNanoUSD
	}
	if r.ErrorType != "" {
		errType = r.ErrorType
	}
	md := "{}"
	if len(r.Metadata) > 0 {
		*buf = appendMetadata((*buf)[:0], r.Metadata)
		md = string(*buf)
	}
	*buf = appendDetail((*buf)[:0], r)
	detail := string(*buf)
	// Integers go in as int64, which database/sql passes on as they
	// are; an int takes its reflection-based converter.
	args = append(args, r.Time.UnixMicro(), r.TraceID, d.id(r.APIKey), d.id(r.Workspace), d.id(r.Organisation),
		d.id(r.VirtualKey), d.id(r.ConfigID), d.id(r.Provider), d.id(r.Model), d.id(r.CacheState),
		int64(r.Status), r.InputTokens, r.OutputTokens, cost, r.Latency.Microseconds(), errType, md, detail)
	if line {
		var batchID, customID any
		if r.BatchID != "" {
			batchID, customID = r.BatchID, r.CustomID
		}
		args = append(args, batchID, customID)
	}
	bucket, hash := traceKey(r.TraceID, r.Time.Add(-r.Latency))
	return append(args, bucket, hash)
}
