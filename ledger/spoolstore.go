package ledger

import (
	"context"
	"database/sql"
	"time"
)

// SpoolStore is a Store that can take records back from a spool exactly
// once: it commits how far a spool segment has been written in the
// transaction of its records, so a segment replayed again (after a crash,
// or a commit whose answer was lost with the connection) skips what is
// already in. The DB is one.
type SpoolStore interface {
	Store
	// InsertSpooled writes recs, the records of segment up to sequence
	// number through, and records through as the segment's position, in
	// one transaction. recs may be empty: the position alone moves (past
	// a record the store refuses).
	InsertSpooled(ctx context.Context, segment string, through uint64, recs []Record) error
	// SpoolPosition is the segment's position: the sequence number of
	// its last record written (0 for none).
	SpoolPosition(ctx context.Context, segment string) (uint64, error)
	// ForgetSpool deletes the position of a segment deleted from disk.
	ForgetSpool(ctx context.Context, segment string) error
}

var _ SpoolStore = (*DB)(nil)

// InsertSpooled implements SpoolStore.
func (s *DB) InsertSpooled(ctx context.Context, segment string, through uint64, recs []Record) error {
	if !s.ready.Load() {
		return ErrNotReady
	}
	for i := range recs {
		cleanRecord(&recs[i])
	}
	return s.write(ctx, func(w txWriter) error {
		if len(recs) > 0 {
			if err := s.insertTx(ctx, w, recs); err != nil {
				return err
			}
		}
		return w.execSQL(ctx, `INSERT INTO llm_ledger_spool (segment, seq, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (segment) DO UPDATE SET seq = excluded.seq, updated_at = excluded.updated_at`,
			segment, int64(through), time.Now().Unix())
	})
}

// SpoolPosition implements SpoolStore.
func (s *DB) SpoolPosition(ctx context.Context, segment string) (uint64, error) {
	if !s.ready.Load() {
		return 0, ErrNotReady
	}
	var seq int64
	err := s.db.QueryRowContext(ctx, s.d.bind("SELECT seq FROM llm_ledger_spool WHERE segment = ?"), segment).Scan(&seq)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return uint64(seq), err
}

// ForgetSpool implements SpoolStore.
func (s *DB) ForgetSpool(ctx context.Context, segment string) error {
	if !s.ready.Load() {
		return ErrNotReady
	}
	_, err := s.db.ExecContext(ctx, s.d.bind("DELETE FROM llm_ledger_spool WHERE segment = ?"), segment)
	return err
}
