package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
)

// BenchmarkConsoleChartsScale times the overview (its chart over 24 h and
// 30 d), the breakdowns (by key and by model over 30 d) and the keys page
// with its use (one grouped query) at BenchmarkConsoleScale's 10,000,000
// ledger records (one a second for 115 days, 1,000 keys, three models),
// with the hourly rollup filled from the records as the ledger's writes
// fill it. CONSOLE_SCALE_RECORDS and CONSOLE_SCALE_KEYS change the
// counts (keys default to 1,000 here: the keys page reads one page of
// them). Seeding takes minutes, so it runs only when asked:
//
//	go test ./integration -run '^$' -bench ConsoleChartsScale -benchtime 5x -timeout 60m
func BenchmarkConsoleChartsScale(b *testing.B) {
	nRecords := envInt(b, "CONSOLE_SCALE_RECORDS", 10_000_000)
	nKeys := 1000
	if testingEnv("CONSOLE_SCALE_KEYS") {
		nKeys = envInt(b, "CONSOLE_SCALE_KEYS", 1000)
	}
	redistest.Require(b)
	rc := redistest.Client(b, consoleScaleDB)
	ctx := context.Background()
	rc.FlushDB(ctx)
	b.Cleanup(func() { rc.FlushDB(context.Background()) })
	up := newFakeOpenAI(b)
	ledgerPath := filepath.Join(b.TempDir(), "ledger.db")
	consoleSiteWith(b, up.URL, ledgerPath, fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t}", redistest.Addr(), consoleScaleDB))
	seedKeys(b, nKeys)
	start := time.Now()
	seedLedger(b, ledgerPath, nRecords)
	b.Logf("%d ledger records inserted in %v", nRecords, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	rows := seedRollup(b, ledgerPath)
	b.Logf("rollup: %d rows from the records in %v", rows, time.Since(start).Round(time.Millisecond))

	c := newConsoleClient(b)
	c.signIn(keysAdminKey)
	for _, p := range []struct{ name, path, want string }{
		{"overview-24h", "/?range=24h", `id="chart"`},
		{"overview-30d", "/?range=30d", `id="chart"`},
		{"breakdown-key-30d", "/breakdowns?by=key&range=30d", "svc-0000"},
		{"breakdown-model-30d", "/breakdowns?by=model&range=30d", "gpt-4o-mini"},
		{"keys-with-use", "/keys", `class="num requests"`},
	} {
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

// testingEnv reports whether the environment variable name is set.
func testingEnv(name string) bool {
	_, ok := os.LookupEnv(name)
	return ok
}

// seedRollup fills the hourly rollup from the seeded records, as the
// ledger's writes do record by record, and returns its rows.
func seedRollup(b *testing.B, path string) int {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	name := func(col string) string { return "(SELECT value FROM llm_ledger_dim WHERE id = " + col + ")" }
	q := `INSERT INTO llm_ledger_rollup (hour, workspace_id, organisation_id, api_key, virtual_key, config_id, provider, model, cache_state, status,
		requests, cost_nano_usd, cost_unknown, input_tokens, output_tokens, latency_us, first_ts, last_ts)
	SELECT h, ` + name("w") + `, ` + name("o") + `, ` + name("k") + `, ` + name("v") + `, ` + name("c") + `, ` + name("p") + `, ` + name("m") + `, ` + name("cs") + `, status,
		n, cost, unknown, inp, outp, lat, first, last FROM (
		SELECT (ts / 3600000000) * 3600000000 AS h, workspace_d AS w, organisation_d AS o, key_d AS k, virtual_key_d AS v, config_d AS c,
			provider_d AS p, model_d AS m, cache_state_d AS cs, status, COUNT(*) AS n, COALESCE(SUM(cost_nano_usd), 0) AS cost,
			SUM(CASE WHEN cost_nano_usd IS NULL THEN 1 ELSE 0 END) AS unknown, SUM(input_tokens) AS inp, SUM(output_tokens) AS outp,
			SUM(latency_us) AS lat, MIN(ts) AS first, MAX(ts) AS last
		FROM llm_ledger GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)`
	if _, err := db.Exec(q); err != nil {
		b.Fatalf("filling the rollup: %v", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM llm_ledger_rollup").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
