package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotReady is what a DB answers before Connect has succeeded: its
// database has not been reached yet (the gateway started while it was
// away), so its schema may not be in place.
var ErrNotReady = errors.New("ledger: the database has not been reached yet")

// Connect applies the schema's migrations and prepares the writer's
// statements, once: after it succeeds the DB is ready and later calls
// return at once. The ledger's keeper calls it, with backoff, until it
// succeeds (a gateway starts while its ledger's PostgreSQL is away).
func (s *DB) Connect(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.ready.Load() {
		return nil
	}
	if err := s.migrateRetrying(ctx); err != nil {
		return fmt.Errorf("ledger: migrating %s: %w", s.name, err)
	}
	if err := s.prepare(ctx); err != nil {
		s.closeStmts()
		s.stmts = nil
		return fmt.Errorf("ledger: preparing statements on %s: %w", s.name, err)
	}
	s.ready.Store(true)
	return nil
}

// Ready reports whether Connect has succeeded.
func (s *DB) Ready() bool { return s.ready.Load() }

// ConfigError reports whether err, from Connect, says the configuration
// is wrong rather than the database away: a password or user refused,
// a database that does not exist, a URL that does not parse. A gateway
// refuses to start on these, as it cannot get better by waiting.
func ConfigError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "3D000" || len(pe.Code) == 5 && pe.Code[:2] == "28"
	}
	var ce *pgconn.ParseConfigError
	return errors.As(err, &ce)
}
