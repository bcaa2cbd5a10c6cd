package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/keys"
)

// consoleScaleDB is the Redis database BenchmarkConsoleScale keeps its
// million keys in and flushes; no test uses it.
const consoleScaleDB = 5

// BenchmarkConsoleScale is the scale: the keys page and the logs
// page's first page with 1,000,000 API keys (in Redis, the store a fleet
// shares, imported through the store's bulk path) and 10,000,000 ledger
// records (SQLite, written by INSERT … SELECT in batches), through a
// real Caddy, signed in as an organisation key that sees every key and
// record. CONSOLE_SCALE_KEYS and CONSOLE_SCALE_RECORDS change the counts.
// Seeding takes minutes, so it runs only when asked:
//
//	go test ./integration -run '^$' -bench ConsoleScale -benchtime 5x -timeout 60m
func BenchmarkConsoleScale(b *testing.B) {
	nKeys, nRecords := envInt(b, "CONSOLE_SCALE_KEYS", 1_000_000), envInt(b, "CONSOLE_SCALE_RECORDS", 10_000_000)
	redistest.Require(b)
	rc := redistest.Client(b, consoleScaleDB)
	ctx := context.Background()
	rc.FlushDB(ctx)
	b.Cleanup(func() { rc.FlushDB(context.Background()) })
	up := newFakeOpenAI(b)
	ledgerPath := filepath.Join(b.TempDir(), "ledger.db")
	consoleSiteWith(b, up.URL, ledgerPath, fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}", redistest.Addr(), consoleScaleDB))

	start := time.Now()
	seedKeys(b, nKeys)
	b.Logf("%d keys imported in %v", nKeys, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	seedLedger(b, ledgerPath, nRecords)
	b.Logf("%d ledger records inserted in %v", nRecords, time.Since(start).Round(time.Millisecond))

	c := newConsoleClient(b)
	c.signIn(keysAdminKey)
	pages := func(ps ...struct{ name, path, want string }) {
		for _, p := range ps {
			b.Run(p.name, func(b *testing.B) {
				for b.Loop() {
					code, body := c.send("GET", p.path, nil)
					if code != http.StatusOK || !strings.Contains(body, p.want) {
						b.Fatalf("%s: %d, %q not in the page", p.path, code, p.want)
					}
				}
			})
		}
	}
	type pg = struct{ name, path, want string }
	pages(pg{"keys", "/keys", fmt.Sprintf("%d keys", nKeys+3)},
		pg{"keys-search-name", "/keys?search=" + url.QueryEscape("SVC-00123"), fmt.Sprintf("%d keys match", max(0, min(nKeys, 12400)-12300))},
		pg{"keys-search-status", "/keys?status=disabled", fmt.Sprintf("%d keys match", (nKeys+99)/100)},
		pg{"logs", "/logs", "svc-"},
		pg{"logs-key", "/logs?key=svc-0000007", "svc-0000007"})
	// A workspace key's logs: the ledger filters on its workspace and its
	// organisation.
	var ws struct {
		Key string `json:"key"`
	}
	if resp, raw := do(b, "POST", "/api-keys/workspace/service", []byte(`{"name":"ws-reader","scopes":["logs.view","api_keys.list"]}`), "x-gateway-api-key", keysAdminKey); resp.StatusCode != 200 || json.Unmarshal(raw, &ws) != nil {
		b.Fatalf("creating a workspace key: %d %s", resp.StatusCode, raw)
	}
	wc := newConsoleClient(b)
	wc.signIn(ws.Key)
	b.Run("logs-workspace-key", func(b *testing.B) {
		for b.Loop() {
			if code, body := wc.send("GET", "/logs", nil); code != http.StatusOK || !strings.Contains(body, "svc-") {
				b.Fatalf("a workspace key's logs: %d", code)
			}
		}
	})
	// The logs API's queries, timed apart on the same file: an exact
	// count of the organisation's records (what the API no longer does:
	// it counts up to 10,001), the page, and the capped count.
	sqlQueries(b, ledgerPath)
}

// sqlQueries times the logs API's queries for the organisation straight
// on the SQLite file: the count, the page of 50, and a count that stops
// at 10,001 (what a bounded total would cost).
func sqlQueries(b *testing.B, path string) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range []struct{ name, sql string }{
		{"sql-count", "SELECT COUNT(*) FROM llm_ledger WHERE organisation_d = " + orgDim},
		{"sql-page", "SELECT COUNT(*) FROM (SELECT id FROM llm_ledger WHERE organisation_d = " + orgDim + " ORDER BY ts DESC, id DESC LIMIT 50)"},
		{"sql-count-capped", "SELECT COUNT(*) FROM (SELECT 1 FROM llm_ledger WHERE organisation_d = " + orgDim + " LIMIT 10001)"},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				var n int
				if err := db.QueryRow(q.sql, keysOrg).Scan(&n); err != nil || n == 0 {
					b.Fatalf("%s: %d %v", q.sql, n, err)
				}
			}
		})
	}
}

// orgDim is the admin's organisation as the records hold it.
const orgDim = "(SELECT id FROM llm_ledger_dim WHERE value = '" + keysOrg + "')"

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("%s=%q: a number of at least 1000", name, v)
		}
		return n
	}
	return def
}

// seedKeys imports n workspace keys named svc-0000000…, spread over 100
// workspaces of the admin's organisation, one in a hundred disabled.
func seedKeys(b *testing.B, n int) {
	a, err := caddy.ActiveContext().App("llm")
	if err != nil {
		b.Fatal(err)
	}
	ks := a.(*app.App).KeyStore()
	h := ks.Hasher()
	recs := make([]*keys.APIKey, n)
	for i := range recs {
		k := keys.NewKey()
		recs[i] = &keys.APIKey{
			ID: keys.NewID(), Name: fmt.Sprintf("svc-%07d", i), Type: keys.TypeWorkspace, SubType: keys.SubTypeService,
			OrganisationID: keysOrg, WorkspaceID: fmt.Sprintf("1c7a4f81-4d5b-4b6a-8b62-%012d", i%100),
			Scopes: []string{"completions.write"}, Digest: h.Sum(k).String(), Prefix: k[:keys.DisplayLen],
		}
		if i%100 == 0 {
			recs[i].Status = keys.StatusDisabled
		}
	}
	if err := ks.ImportAPIKeys(context.Background(), recs, 16); err != nil {
		b.Fatal(err)
	}
}

// seedLedger inserts n records into the ledger's SQLite file, newest
// last, one a second up to now, in the admin's workspace, for 1,000 keys
// (svc-0000000 to svc-0000999) and three models, one in fifty a 500.
// Batches of 500,000 rows, each one INSERT … SELECT over a counter, keep
// the write-ahead log small. The hourly rollup is not filled: the pages
// timed here read the records.
func seedLedger(b *testing.B, path string, n int) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	// The records' names are ids of the ledger's dictionary (ledger
	// migration 8): the names are added first, then read by value.
	const names = `INSERT INTO llm_ledger_dim (value) SELECT v FROM (
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < 1000)
		SELECT printf('svc-%07d', i) AS v FROM n UNION SELECT ? UNION SELECT ? UNION SELECT 'fake' UNION SELECT ''
		UNION SELECT 'openai' UNION SELECT 'gpt-4o-mini' UNION SELECT 'gpt-4o' UNION SELECT 'o3-mini' UNION SELECT 'MISS')
	WHERE true ON CONFLICT (value) DO NOTHING`
	if _, err := db.Exec(names, keysWorkspace, keysOrg); err != nil {
		b.Fatalf("adding the records' names: %v", err)
	}
	dim := func(v string) string { return "(SELECT id FROM llm_ledger_dim WHERE value = '" + v + "')" }
	q := `INSERT INTO llm_ledger (ts, trace_id, key_d, workspace_d, organisation_d, virtual_key_d, config_d, provider_d, model_d,
		cache_state_d, status, input_tokens, output_tokens, cost_nano_usd, latency_us, error_type, metadata, detail)
	WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
	SELECT ? + i * 1000000, printf('%032x', i), (SELECT id FROM llm_ledger_dim WHERE value = printf('svc-%07d', i % 1000)),
		` + dim(keysWorkspace) + `, ` + dim(keysOrg) + `, ` + dim("fake") + `, ` + dim("") + `, ` + dim("openai") + `,
		CASE i % 3 WHEN 0 THEN ` + dim("gpt-4o-mini") + ` WHEN 1 THEN ` + dim("gpt-4o") + ` ELSE ` + dim("o3-mini") + ` END,
		` + dim("MISS") + `, CASE WHEN i % 50 = 0 THEN 500 ELSE 200 END, 10 + i % 100, 20, 1500 + i % 7, 120000 + i % 1000,
		NULL, '{}', '{"op":"chat.completions"}'
	FROM n`
	first := time.Now().Add(-time.Duration(n) * time.Second).UnixMicro()
	const batch = 500_000
	for lo := 0; lo < n; lo += batch {
		if _, err := db.Exec(q, lo, min(lo+batch, n), first); err != nil {
			b.Fatalf("inserting records %d…: %v", lo, err)
		}
	}
	var got int
	if err := db.QueryRow("SELECT COUNT(*) FROM llm_ledger").Scan(&got); err != nil || got < n {
		b.Fatalf("%d records after seeding (%v)", got, err)
	}
}
