package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
)

// otherKey is a second gateway key, in a workspace of its own.
const otherKey = "other-gateway-key-0123456789"

// ledgerStores are the stores the ledger's integration tests run
// against: the embedded SQLite file and the test PostgreSQL.
var ledgerStores = []struct {
	name string
	dsn  func(testing.TB) string
}{
	{"sqlite", func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "ledger.db") }},
	{"postgres", ledgerPostgres},
}

var ledgerSchemas atomic.Int64

// ledgerPostgres returns the DSN of a fresh schema of the test PostgreSQL
// ($LEDGER_TEST_POSTGRES, else postgres@127.0.0.1:5432/test), dropped at
// the end of the test. Unreachable, it skips, or fails when CI requires
// the databases (REQUIRE_REDIS=1).
func ledgerPostgres(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("LEDGER_TEST_POSTGRES")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	db, err := sql.Open("pgx", base)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		if os.Getenv("REQUIRE_REDIS") == "1" {
			tb.Fatalf("PostgreSQL is unreachable and REQUIRE_REDIS=1: %v", err)
		}
		tb.Skipf("skipping: PostgreSQL is unreachable (%v); set LEDGER_TEST_POSTGRES or REQUIRE_REDIS=1 to make this a failure", err)
	}
	schema := fmt.Sprintf("ledger_it_%d_%d", os.Getpid(), ledgerSchemas.Add(1))
	if _, err := db.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = db.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE")
		db.Close()
	})
	return base + "&search_path=" + schema
}

// syncLedger waits until every request recorded so far is written.
func syncLedger(t testing.TB) {
	t.Helper()
	a, err := caddy.ActiveContext().App("llm")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.(*app.App).UsageLedger().Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// ledgerSite is a gateway keeping its ledger in dsn, with a second key
// in another workspace.
func ledgerSite(dsn string) site {
	return site{LLM: fmt.Sprintf("api_key other %s\n\t\tledger %q {\n\t\t\tretention 30d\n\t\t}", otherKey, dsn)}
}

// getJSON GETs a control-plane path with key and decodes the answer.
func getJSON(t *testing.T, path, key string, out any) int {
	t.Helper()
	resp, raw := do(t, "GET", path, nil, "x-gateway-api-key", key)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, raw)
		}
	}
	return resp.StatusCode
}

// nanoOf parses a decimal dollar amount into nano-dollars exactly.
func nanoOf(t *testing.T, s string) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("not a decimal: %q", s)
	}
	return r.Mul(r, big.NewRat(ledger.NanoUSD, 1))
}

// TestLedgerTotalsAgree sends a mixed run (JSON answers, streams with
// usage, an unpriced model, a refused upstream call, embeddings) and
// checks, on each store, that the analytics totals equal the ledger's
// records, that the records' cost equals the x-gateway-cost headers the
// clients got, and that the other workspace's key sees none of it.
func TestLedgerTotalsAgree(t *testing.T) {
	for _, st := range ledgerStores {
		t.Run(st.name, func(t *testing.T) {
			up := newFakeOpenAI(t)
			loadFresh(t, ledgerSite(st.dsn(t)))
			from := time.Now().Add(-time.Minute).UTC()
			hdr := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider"}
			headerSum := new(big.Rat)
			sent := 0
			send := func(path, body string, extra ...string) {
				t.Helper()
				resp, raw := do(t, "POST", path, []byte(body), append(append([]string{}, hdr...), extra...)...)
				sent++
				if c := resp.Header.Get("X-Gateway-Cost"); c != "" {
					headerSum.Add(headerSum, nanoOf(t, c))
				}
				_ = raw
			}
			for i := 0; i < 3; i++ {
				send("/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
					"x-gateway-metadata", `{"_user":"alice"}`)
			}
			send("/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, "x-gateway-metadata", `{"_user":"bob"}`)
			send("/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)
			send("/chat/completions", `{"model":"no-such-priced-model","messages":[]}`)
			send("/chat/completions", `{"model":"gpt-4o-mini","messages":[]}`, "Authorization", "Bearer wrong")
			send("/embeddings", `{"model":"text-embedding-3-small","input":"x"}`)
			// The other workspace's request.
			do(t, "POST", "/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[]}`), append(append([]string{}, hdr...), "x-gateway-api-key", otherKey)...)
			syncLedger(t)

			q := "?time_of_generation_min=" + url.QueryEscape(from.Format(time.RFC3339)) +
				"&time_of_generation_max=" + url.QueryEscape(time.Now().Add(time.Minute).UTC().Format(time.RFC3339))
			var logs struct {
				Total int64
				Data  []struct {
					ID       string `json:"id"`
					Model    string `json:"model"`
					Status   int    `json:"status"`
					CostNano int64  `json:"cost_nano_usd"`
					Known    bool   `json:"cost_known"`
					Stream   bool   `json:"stream"`
					APIKey   string `json:"api_key"`
				}
			}
			if code := getJSON(t, "/logs"+q+"&page_size=100", gatewayKey, &logs); code != 200 || logs.Total != int64(sent) {
				t.Fatalf("GET /v1/logs: %d, %d records; want %d", code, logs.Total, sent)
			}
			var ledgerSum, streamNano int64
			unknown := 0
			for _, l := range logs.Data {
				if l.APIKey != "test" {
					t.Errorf("a record of key %q in the test key's logs", l.APIKey)
				}
				ledgerSum += l.CostNano
				if !l.Known {
					unknown++
				}
				if l.Stream {
					streamNano += l.CostNano
				}
			}
			if unknown != 1 || streamNano == 0 {
				t.Errorf("%d records of unknown cost (want 1), stream cost %d (want priced)", unknown, streamNano)
			}
			// Streams carry no cost header (the cost is known at their
			// end): the headers sum to the ledger less the stream.
			if want := new(big.Rat).SetInt64(ledgerSum - streamNano); headerSum.Cmp(want) != 0 {
				t.Errorf("x-gateway-cost headers sum to %s nano-dollars, the ledger's non-stream records to %s", headerSum.RatString(), want.RatString())
			}
			var cost struct {
				Summary struct {
					TotalUSD    string `json:"total_usd"`
					CostUnknown int64  `json:"cost_unknown"`
				}
				DataPoints []map[string]any `json:"data_points"`
				Object     string
			}
			if code := getJSON(t, "/analytics/graphs/cost"+q, gatewayKey, &cost); code != 200 || cost.Object != "analytics-graph" {
				t.Fatalf("cost graph: %d %+v", code, cost)
			}
			if got := nanoOf(t, cost.Summary.TotalUSD); got.Cmp(new(big.Rat).SetInt64(ledgerSum)) != 0 || cost.Summary.CostUnknown != 1 {
				t.Errorf("cost graph total %s (%d unknown), ledger records %d nano-dollars", cost.Summary.TotalUSD, cost.Summary.CostUnknown, ledgerSum)
			}
			var reqs struct{ Summary struct{ Total int64 } }
			getJSON(t, "/analytics/graphs/requests"+q, gatewayKey, &reqs)
			var errs struct{ Summary struct{ Total int64 } }
			getJSON(t, "/analytics/graphs/errors"+q, gatewayKey, &errs)
			if reqs.Summary.Total != int64(sent) || errs.Summary.Total != 1 {
				t.Errorf("requests graph %d (want %d), errors %d (want 1)", reqs.Summary.Total, sent, errs.Summary.Total)
			}
			var models struct {
				Total int64
				Data  []map[string]any
			}
			getJSON(t, "/analytics/groups/ai-models"+q, gatewayKey, &models)
			groupSum := new(big.Rat)
			for _, g := range models.Data {
				groupSum.Add(groupSum, nanoOf(t, g["cost_usd"].(string)))
			}
			if groupSum.Cmp(new(big.Rat).SetInt64(ledgerSum)) != 0 {
				t.Errorf("ai-model groups sum to %s, records to %d", groupSum.RatString(), ledgerSum)
			}
			var users struct{ Data []map[string]any }
			getJSON(t, "/analytics/groups/users"+q, gatewayKey, &users)
			if len(users.Data) < 2 || users.Data[0]["user"] != "" || users.Data[0]["requests"] != float64(sent-4) ||
				users.Data[1]["user"] != "alice" || users.Data[1]["requests"] != float64(3) {
				t.Errorf("users groups: %+v; want %d without a user, then alice's 3", users.Data, sent-4)
			}
			t.Logf("%d requests, ledger %d nano-dollars (stream %d), headers %s", sent, ledgerSum, streamNano, headerSum.RatString())
			var me struct {
				APIKey string `json:"api_key"`
				Month  struct {
					Requests int64
					CostUSD  string `json:"cost_usd"`
				}
			}
			if code := getJSON(t, "/usage/me", gatewayKey, &me); code != 200 || me.APIKey != "test" || me.Month.Requests != int64(sent) ||
				nanoOf(t, me.Month.CostUSD).Cmp(new(big.Rat).SetInt64(ledgerSum)) != 0 {
				t.Errorf("usage/me: %d %+v; want %d requests costing %d nano-dollars", code, me, sent, ledgerSum)
			}
			// The other key sees only its own request, and cannot read a
			// log of the test key's by id.
			var other struct{ Total int64 }
			getJSON(t, "/logs"+q, otherKey, &other)
			if other.Total != 1 {
				t.Errorf("the other workspace's key sees %d records, want its 1", other.Total)
			}
			if code := getJSON(t, "/logs/"+logs.Data[0].ID, otherKey, nil); code != 404 {
				t.Errorf("another workspace's log by id: %d, want 404", code)
			}
			if code := getJSON(t, "/logs/"+logs.Data[0].ID, gatewayKey, nil); code != 200 {
				t.Errorf("own log by id: %d, want 200", code)
			}
		})
	}
}

// TestLedgerAPIRefusesHostileInput checks that bad parameters answer 400
// (or 403 for another workspace) in the envelope, never a query.
func TestLedgerAPIRefusesHostileInput(t *testing.T) {
	loadFresh(t, ledgerSite(filepath.Join(t.TempDir(), "ledger.db")))
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/logs?page_size=1000", 400},
		{"/logs?current_page=-1", 400},
		{"/logs?time_of_generation_min=yesterday", 400},
		{"/analytics/graphs/cost?time_of_generation_min=2020-01-01T00:00:00Z&time_of_generation_max=2026-01-01T00:00:00Z", 400},
		{"/analytics/graphs/cost?time_of_generation_min=2026-01-02T00:00:00Z&time_of_generation_max=2026-01-01T00:00:00Z", 400},
		{"/analytics/graphs/requests?status_code=abc", 400},
		{"/analytics/graphs/requests?metadata=" + url.QueryEscape(`{"a b":"x"}`), 400},
		{"/analytics/graphs/requests?metadata=" + url.QueryEscape(`{"k":1}`), 400},
		{"/analytics/graphs/requests?api_key_ids=" + strings.Repeat("k,", 200), 400},
		{"/analytics/groups/metadata/" + url.PathEscape(`x"y`), 400},
		{"/analytics/graphs/requests?workspace_slug=00000000-0000-0000-0000-000000000000", 403},
		{"/logs/abc", 400},
		{"/logs/999999", 404},
		{"/analytics/summary/cache", 404},
	} {
		resp, raw := do(t, "GET", tc.path, nil)
		if resp.StatusCode != tc.want || resp.Header.Get("x-gateway-error") != "true" {
			t.Errorf("%s: %d %s; want %d in the envelope", tc.path, resp.StatusCode, raw, tc.want)
		}
	}
}

// TestLedgerNotConfigured: without the ledger option the APIs say so.
func TestLedgerNotConfigured(t *testing.T) {
	loadFresh(t, site{})
	resp, raw := do(t, "GET", "/logs", nil)
	if resp.StatusCode != 404 || !strings.Contains(string(raw), "ledger_not_configured") {
		t.Errorf("GET /v1/logs without a ledger: %d %s", resp.StatusCode, raw)
	}
}
