package keys

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sqlkv"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sqlkv/sqlkvtest"
)

// TestPropagationSQL is the propagation test with the records in SQL
// (two instances, each with its own connections to one database): alone
// (the change counter is a SQL row, read by the poll) and with Redis as
// the change feed (the records in SQL, the counter and announcements in
// Redis), on SQLite and PostgreSQL.
func TestPropagationSQL(t *testing.T) {
	dbs := []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "records.db") }},
		{"postgres", func(t *testing.T) string { return sqlkvtest.PostgresDSN(t) }},
	}
	for _, db := range dbs {
		for _, feed := range []string{"poll", "redis"} {
			t.Run(db.name+"/"+feed, func(t *testing.T) {
				dsn := db.dsn(t)
				open := func() *sqlkv.KV {
					kv, err := sqlkv.Open(dsn)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { kv.Close() })
					return kv
				}
				if feed == "poll" {
					testPropagation(t, open(), nil, open(), nil)
					return
				}
				// The database TestPropagationRedis flushes (no other
				// package uses it); tests of a package run one by one.
				c := redistest.Client(t, propagationDB)
				c.FlushDB(context.Background())
				testPropagation(t, open(), c, open(), redistest.Client(t, propagationDB))
			})
		}
	}
}
