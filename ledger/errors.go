package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dataError reports whether err is the database refusing what a record
// holds (PostgreSQL's data exceptions and integrity violations, SQLite's
// constraint, size and type errors), as opposed to the database being
// away or failing: a batch refused for its data is retried record by
// record, so that only the record at fault is lost.
func dataError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return len(pe.Code) == 5 && (pe.Code[:2] == "22" || pe.Code[:2] == "23")
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE:
			return true
		}
	}
	return false
}

// errorCode is err's SQLSTATE or SQLite result code, for a log line that
// must not quote what the record held (a refused value can appear in the
// database's message).
func errorCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return sqlite.ErrorCodeString[se.Code()]
	}
	return "unknown"
}

// pinger is a store that can tell whether its database answers (the
// DB): readiness probes ask it, and the writer asks it to tell a batch
// refused for its records from a database that is away.
type pinger interface {
	Ping(ctx context.Context) error
}

// storeFault reports whether err says the database or the connection
// failed (whatever the records held): a timeout, a cancelled context,
// a lost connection, or PostgreSQL's connection, rollback, resource,
// operator and system classes; SQLite busy, locked, I/O or full.
func storeFault(err error) bool {
	if errors.Is(err, ErrNotReady) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Code == "55P03" || len(pe.Code) != 5 {
			return true
		}
		switch pe.Code[:2] {
		case "08", "40", "53", "57", "58", "XX":
			return true
		}
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL,
			sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PROTOCOL:
			return true
		}
		return false
	}
	return pgconn.SafeToRetry(err)
}

// refusedForData reports whether a failed write failed for what its
// records hold, so that writing them one by one isolates the one at
// fault: a data error (dataError), or an error that is no fault of the
// store (storeFault) while the store still answers a ping (pgx refuses
// to encode a value out of a column's range before sending it, with an
// error of no type). A database that does not answer is never taken
// for a bad record: its records wait instead of being dropped.
func refusedForData(st Store, err error) bool {
	if dataError(err) {
		return true
	}
	if storeFault(err) {
		return false
	}
	p, ok := st.(pinger)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Ping(ctx) == nil
}
