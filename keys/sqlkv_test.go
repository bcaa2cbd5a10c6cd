package keys

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// benchKeys is how many keys BenchmarkSQLRecords fills ($SQLREC_BENCH_KEYS,
// default 1,000,000).
func benchKeys() int {
	if n, err := strconv.Atoi(os.Getenv("SQLREC_BENCH_KEYS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// fillSQL writes n API key records straight into the records table (one
// transaction, multi-row inserts) and returns the middle key and its id.
func fillSQL(b *testing.B, kv *sqlkv.KV, s *Store, n int) (probe, probeID string) {
	ctx := context.Background()
	if err := kv.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	tx, err := kv.DB().BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 500
	var sb strings.Builder
	args := make([]any, 0, batch*5)
	flush := func() {
		if len(args) == 0 {
			return
		}
		q := sb.String()
		if kv.Postgres() {
			var pb strings.Builder
			k := 0
			for i := 0; i < len(q); i++ {
				if q[i] == '?' {
					k++
					pb.WriteString("$" + strconv.Itoa(k))
					continue
				}
				pb.WriteByte(q[i])
			}
			q = pb.String()
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
		sb.Reset()
		args = args[:0]
	}
	for i := 0; i < n; i++ {
		if len(args) == 0 {
			sb.WriteString("INSERT INTO llm_records (key, kind, dir, value, modified) VALUES ")
		} else {
			sb.WriteString(",")
		}
		sb.WriteString("(?, ?, ?, ?, ?)")
		k := fmt.Sprintf("%s%043d", KeyPrefix, i)
		r := &APIKey{ID: NewID(), Name: fmt.Sprintf("service-%07d", i), Type: "workspace", SubType: "service",
			OrganisationID: "org", WorkspaceID: fmt.Sprintf("ws-%02d", i%100), Scopes: []string{"completions.write"},
			Status: StatusActive, Prefix: k[:10], Digest: s.Hasher().Sum(k).String(), CreatedAt: time.Now().UTC()}
		data, _ := json.Marshal(r)
		key := "llm_gateway/keys/api_keys/" + r.ID + ".json"
		args = append(args, key, sqlkv.KindOf(key), "llm_gateway/keys/api_keys", data, time.Now().UnixMilli())
		if i == n/2 {
			probe, probeID = k, r.ID
		}
		if len(args) == batch*5 {
			flush()
		}
	}
	flush()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return probe, probeID
}

// BenchmarkSQLRecords measures the key store over SQL records at 10 and
// at benchKeys() keys, on SQLite and PostgreSQL. It logs how long reading
// every record into memory takes (a start, or a reload after a missed
// change); "cold" reads one record from SQL (what applying another instance's
// change costs), "hit" authenticates a key (memory: one HMAC and one map
// read), "page" lists a workspace key's first page of 50 (memory).
func BenchmarkSQLRecords(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, n := range []int{10, benchKeys()} {
			b.Run(fmt.Sprintf("%s/%d", db, n), func(b *testing.B) {
				var dsn string
				if db == "sqlite" {
					dsn = filepath.Join(b.TempDir(), "records.db")
				} else {
					dsn = sqlkvtest.PostgresDSN(b)
				}
				kv, err := sqlkv.Open(dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer kv.Close()
				s := newTestStore(b, kv, nil)
				probe, probeID := fillSQL(b, kv, s, n)
				ctx := context.Background()
				// One full read, timed once (at a million records a
				// benchmark loop of it would take minutes).
				start := time.Now()
				if err := s.Load(ctx); err != nil {
					b.Fatal(err)
				}
				b.Logf("%s: loading %d records took %v", db, n, time.Since(start))
				b.Run("cold", func(b *testing.B) {
					for b.Loop() {
						if _, err := kv.Load(ctx, "llm_gateway/keys/api_keys/"+probeID+".json"); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("hit", func(b *testing.B) {
					for b.Loop() {
						if _, _, res := s.Lookup(probe); res != Valid {
							b.Fatal(res)
						}
					}
				})
				ws := func(r *APIKey) bool { return r.WorkspaceID == "ws-07" }
				b.Run("page", func(b *testing.B) {
					for b.Loop() {
						s.SearchAPIKeys(KeyFilter{Keep: ws}, "", 0, 50)
					}
				})
			})
		}
	}
}
