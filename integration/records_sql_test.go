package integration

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// recordsDB is the Redis database the records tests flush; no other test
// uses it.
const recordsDB = 7

// recordsStores are where the records tests keep the ledger, and so the
// records: a SQLite file (records in llm-records.db beside it) and a
// PostgreSQL schema (records in the same schema).
var recordsStores = []struct {
	name string
	dsn  func(testing.TB) string
}{
	{"sqlite", func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "ledger.db") }},
	{"postgres", ledgerPostgres},
}

// recordsSQL opens the database the records of a ledger dsn live in.
func recordsSQL(t *testing.T, dsn string) (*sql.DB, func(string) string) {
	t.Helper()
	driver, conn := "pgx", dsn
	bind := func(q string) string { return strings.ReplaceAll(q, "?", "$1") }
	if !strings.HasPrefix(dsn, "postgres") {
		driver, conn = "sqlite", filepath.Join(filepath.Dir(dsn), "llm-records.db")
		bind = func(q string) string { return q }
	}
	db, err := sql.Open(driver, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, bind
}

// chatWith calls the gateway through the OpenAI SDK with a gateway key.
func chatWith(key string) error {
	client := openai.NewClient(option.WithBaseURL(gatewayURL()+"/"), option.WithAPIKey(key),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	_, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini"))
	return err
}

// TestRecordsSurviveRedisFlush: with a ledger and Redis, the records live
// in the ledger's database and Redis is only the change feed: a key
// created through the API works through the OpenAI SDK, a FLUSHDB of
// Redis (an operator's, or an eviction's worst case) does not remove it,
// it still works once the gateway has reread its records (the flush
// resets the change counter, which every instance answers by reading
// everything again), and after a reload; its record is a SQL row.
func TestRecordsSurviveRedisFlush(t *testing.T) {
	for _, st := range recordsStores {
		t.Run(st.name, func(t *testing.T) {
			dsn := st.dsn(t)
			rc := redistest.Client(t, recordsDB)
			ctx := context.Background()
			rc.FlushDB(ctx)
			up := newFakeOpenAI(t)
			s := newKeysSite(t, vkOpenAI("openai", up.URL)+fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}\n\t\tledger %s\n\t\t", redistest.Addr(), recordsDB, dsn))
			s.load(t)
			var created createdKey
			as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"durable","scopes":["completions.write"],"defaults":{"virtual_key":"openai"}}`, 200, &created)
			if err := chatWith(created.Key); err != nil {
				t.Fatalf("chat with the new key: %v", err)
			}
			db, bind := recordsSQL(t, dsn)
			var kind string
			if err := db.QueryRow(bind(`SELECT kind FROM llm_records WHERE key LIKE ?`), "%/api_keys/"+created.ID+".json").Scan(&kind); err != nil || kind != "api_key" {
				t.Fatalf("the key's SQL row: %q, %v", kind, err)
			}
			// No row holds the key itself (only its digest); the id
			// is found, so the search reads the values.
			text := "CAST(value AS TEXT)"
			if strings.HasPrefix(dsn, "postgres") {
				text = "convert_from(value, 'UTF8')"
			}
			for probe, want := range map[string]bool{created.Key: false, created.ID: true} {
				var n int
				if err := db.QueryRow(bind(`SELECT COUNT(*) FROM llm_records WHERE `+text+` LIKE ?`), "%"+probe+"%").Scan(&n); err != nil || (n > 0) != want {
					t.Fatalf("rows holding %.8s…: %d (%v), want some: %v", probe, n, err, want)
				}
			}
			if err := rc.FlushDB(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			// The poll (every second) sees the counter gone and reads
			// every record again from SQL; the key works throughout.
			for i := 0; i < 3; i++ {
				if err := chatWith(created.Key); err != nil {
					t.Fatalf("after the flush (%d): %v", i, err)
				}
				time.Sleep(700 * time.Millisecond)
			}
			s.load(t)
			if err := chatWith(created.Key); err != nil {
				t.Fatalf("after a reload: %v", err)
			}
			// A dump of Redis holds no record of the key.
			for it := rc.Scan(ctx, 0, "*", 1000).Iterator(); it.Next(ctx); {
				if strings.Contains(it.Val(), created.ID) {
					t.Fatalf("Redis holds %s", it.Val())
				}
			}
		})
	}
}

// TestRecordsImportedOnce: a gateway upgraded in place keeps its records.
// Records written by today's layout (a key, a usage limit, a rate-limit
// policy and a prompt in Redis, or in Caddy's storage without Redis) are
// copied into SQL when a ledger is added, once: they are served from SQL
// (a Redis flush afterwards changes nothing), the marker row records the
// import, and a record changed after it (a key revoked) or deleted (a
// usage limit) is not brought back from the old store at the next start.
func TestRecordsImportedOnce(t *testing.T) {
	for _, from := range []string{"redis", "storage"} {
		for _, st := range recordsStores {
			t.Run(from+"/"+st.name, func(t *testing.T) {
				ctx := context.Background()
				rc := redistest.Client(t, recordsDB)
				rc.FlushDB(ctx)
				up := newFakeOpenAI(t)
				base := vkOpenAI("openai", up.URL)
				if from == "redis" {
					base += fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}\n\t\t", redistest.Addr(), recordsDB)
				}
				s := newKeysSite(t, base)
				s.load(t)
				var key, gone createdKey
				as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"old","scopes":["completions.write"],"defaults":{"virtual_key":"openai"}}`, 200, &key)
				as(t, keysAdminKey, "POST", "/api-keys/workspace/service", `{"name":"gone","scopes":["completions.write"]}`, 200, &gone)
				const cond = `"conditions":[{"key":"api_key","value":"*"}],"group_by":[{"key":"api_key"}]`
				var limit struct {
					ID string `json:"id"`
				}
				as(t, keysAdminKey, "POST", "/policies/usage-limits", `{"name":"old-limit","type":"cost","credit_limit":100,"periodic_reset":"monthly",`+cond+`}`, 200, &limit)
				as(t, keysAdminKey, "POST", "/policies/rate-limits", `{"name":"old-rl","type":"requests","unit":"rpm","value":1000,`+cond+`}`, 200, nil)
				as(t, keysAdminKey, "POST", "/prompts", `{"name":"old-prompt","string":"[{\"role\":\"user\",\"content\":\"Hi {{name}}\"}]","model":"gpt-4o-mini"}`, 200, nil)
				if err := chatWith(key.Key); err != nil {
					t.Fatalf("before the upgrade: %v", err)
				}

				// The upgrade: the same gateway with a ledger.
				dsn := st.dsn(t)
				s.LLM = base + "ledger " + dsn + "\n\t\t"
				s.load(t)
				if err := chatWith(key.Key); err != nil {
					t.Fatalf("after the upgrade: %v", err)
				}
				db, bind := recordsSQL(t, dsn)
				var marker string
				if err := db.QueryRow(bind(`SELECT value FROM llm_records WHERE key = ?`), "llm_gateway/records/imported").Scan(&marker); err != nil {
					t.Fatalf("no import marker: %v", err)
				}
				t.Logf("marker: %s", marker)
				for _, kind := range []string{"api_key", "usage_limit_policy", "rate_limit_policy", "prompt"} {
					var n int
					if err := db.QueryRow(bind(`SELECT COUNT(*) FROM llm_records WHERE kind = ?`), kind).Scan(&n); err != nil || n == 0 {
						t.Errorf("no %s imported: %d, %v", kind, n, err)
					}
				}
				for _, path := range []string{"/policies/usage-limits", "/policies/rate-limits", "/prompts"} {
					raw := as(t, keysAdminKey, "GET", path, "", 200, nil)
					if !strings.Contains(string(raw), `"old-`) {
						t.Errorf("GET %s after the import: %s", path, raw)
					}
				}
				// Revoked after the import: the old store still holds it
				// active.
				as(t, keysAdminKey, "DELETE", "/api-keys/"+gone.ID, "", 200, nil)
				revoked := func(when string) {
					t.Helper()
					raw := call(t, "POST", "/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, 401, nil, "x-gateway-api-key", gone.Key)
					if errCode(t, raw) != "api_key_revoked" {
						t.Fatalf("%s: the revoked key: %s", when, raw)
					}
				}
				revoked("after the import")
				// Deleted after the import: the old store still holds it.
				as(t, keysAdminKey, "DELETE", "/policies/usage-limits/"+limit.ID, "", 200, nil)
				// A start without the ledger (the records database is
				// closed), then with it again: the marker stops a second
				// import, which would find the old store's records.
				s.LLM = base
				s.load(t)
				s.LLM = base + "ledger " + dsn + "\n\t\t"
				s.load(t)
				if err := chatWith(key.Key); err != nil {
					t.Fatalf("at the next start: %v", err)
				}
				revoked("at the next start")
				if raw := as(t, keysAdminKey, "GET", "/policies/usage-limits", "", 200, nil); strings.Contains(string(raw), limit.ID) {
					t.Fatalf("a usage limit deleted after the import is back: %s", raw)
				}
				if from == "redis" {
					rc.FlushDB(ctx)
					time.Sleep(1500 * time.Millisecond) // the poll rereads SQL
					if err := chatWith(key.Key); err != nil {
						t.Fatalf("after a flush: %v", err)
					}
				}
			})
		}
	}
}
