package ledger

import (
	"context"
	"database/sql"
	"strings"
)

// The writer's statements are prepared once and kept: parsing a
// multi-row INSERT (SQLite's parser, pure Go here) for every batch was a
// quarter of the embedded writer's CPU. A batch is cut into chunks whose
// sizes are maxChunk or a power of two below it (rowChunk), so at most
// eight shapes of each statement are ever prepared.

// maxChunk is the most rows one INSERT carries: 128 rows of 22 columns
// are 2,816 parameters, well below both databases' limits.
const maxChunk = 128

// rowChunk is the size of the next chunk of a batch with rest rows left:
// maxChunk while that many are left, then the largest power of two not
// above rest.
func rowChunk(rest int) int {
	if rest >= maxChunk {
		return maxChunk
	}
	n := 1
	for n*2 <= rest {
		n *= 2
	}
	return n
}

// stmtKind names a family of statements that differ by row count.
type stmtKind uint8

const (
	stmtInsert     stmtKind = iota // INSERT of records (insertSQL)
	stmtInsertLine                 // INSERT of one batch line, ignored when present
	stmtRollup                     // the rollup's upsert (rollupSQL)
)

type stmtKey struct {
	kind stmtKind
	rows int
}

// stmts are a DB's prepared statements, every shape prepared when the
// database opens (prepare), so the map is only read afterwards. On
// PostgreSQL it holds none: pgx prepares what the writer runs on each
// connection itself, from the texts in sqlText.
type stmts map[stmtKey]*sql.Stmt

// prepare prepares every shape of the writer's statements (SQLite) or
// writes their texts (PostgreSQL). It runs before any transaction:
// preparing on the pool while a transaction holds its only connection
// (":memory:") would wait forever.
func (s *DB) prepare(ctx context.Context) error {
	if !s.d.postgres && !s.memory && s.wconn == nil {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return err
		}
		s.wconn = c
	}
	s.stmts = make(stmts, 17)
	s.sqlText = make(map[stmtKey]string, 17)
	keys := []stmtKey{{stmtInsertLine, 1}}
	for n := 1; n <= maxChunk; n *= 2 {
		keys = append(keys, stmtKey{stmtInsert, n}, stmtKey{stmtRollup, n})
	}
	for _, k := range keys {
		q := s.d.bind(s.stmtSQL(k))
		s.sqlText[k] = q
		if s.d.postgres {
			continue
		}
		// Prepared on the pool, not on the writer's connection: a
		// transaction re-prepares a statement of a sql.Conn every time
		// (Tx.StmtContext), while one of the pool is prepared once on
		// each connection it runs on and kept.
		st, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		s.stmts[k] = st
	}
	return nil
}

// stmtText is the text of the writer's statement k, bound for the
// dialect.
func (s *DB) stmtText(k stmtKey) string {
	if q, ok := s.sqlText[k]; ok {
		return q
	}
	return s.d.bind(s.stmtSQL(k))
}

func (s *DB) stmtSQL(k stmtKey) string {
	switch k.kind {
	case stmtInsert:
		q := insertSQL(k.rows, false)
		if !s.d.postgres {
			// A multi-row INSERT that may abort halfway makes SQLite keep
			// a statement journal of every page it touches, to undo its
			// own rows; OR FAIL keeps the rows before a failing one, and
			// the transaction, rolled back on any error, undoes them.
			q = "INSERT OR FAIL" + strings.TrimPrefix(q, "INSERT")
		}
		return q
	case stmtInsertLine:
		return insertSQL(1, true) + " ON CONFLICT DO NOTHING"
	default:
		return s.rollupSQL(k.rows)
	}
}

// stmt returns the statement of kind for rows rows bound to tx.
// database/sql keeps a statement prepared on each connection it has run
// on, so a transaction on any of them reuses it.
func (s *DB) stmt(ctx context.Context, tx *sql.Tx, kind stmtKind, rows int) (*sql.Stmt, error) {
	if st := s.stmts[stmtKey{kind, rows}]; st != nil {
		return tx.StmtContext(ctx, st), nil
	}
	// Not a prepared shape: prepared for this transaction only.
	return tx.PrepareContext(ctx, s.stmtText(stmtKey{kind, rows}))
}

// closeStmts closes the prepared statements (Close).
func (s *DB) closeStmts() {
	for _, st := range s.stmts {
		st.Close()
	}
}

// execChunked runs the statement of kind over n rows in chunks of
// rowChunk's sizes within w, appendRow appending row i's values to the
// arguments.
func execChunked(ctx context.Context, w txWriter, kind stmtKind, n, perRow int, appendRow func(args []any, i int) []any) error {
	args := make([]any, 0, min(n, maxChunk)*perRow)
	for start := 0; start < n; {
		size := rowChunk(n - start)
		args = args[:0]
		for i := start; i < start+size; i++ {
			args = appendRow(args, i)
		}
		if _, err := w.exec(ctx, kind, size, args); err != nil {
			return err
		}
		start += size
	}
	return nil
}
