package integration

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/budgets"
)

// The ledger's PostgreSQL goes away: the gateway keeps serving, its
// records wait in the spool on disk, and when the database returns every
// record served is written, once. The database is reached through a
// cutProxy (batches_hardening_store_test.go) the test opens and cuts.

// outageLedger is a ledger DSN whose PostgreSQL is behind a cutProxy, the
// proxy, and a connection to the database's schema to count with.
type outageLedger struct {
	dsn    string
	px     *cutProxy
	db     *sql.DB
	schema string
}

func newOutageLedger(t *testing.T) *outageLedger {
	t.Helper()
	dsn := ledgerPostgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := newCutProxy(t, u.Host)
	schema := u.Query().Get("search_path")
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	u.Host = px.addr()
	return &outageLedger{dsn: u.String(), px: px, db: db, schema: schema}
}

// counts are the records in the ledger and their distinct trace ids (0
// while the schema is not there yet).
func (o *outageLedger) counts() (records, distinct int) {
	_ = o.db.QueryRow("SELECT count(*), count(DISTINCT trace_id) FROM "+o.schema+".llm_ledger").Scan(&records, &distinct)
	return records, distinct
}

// waitForRecords polls until the ledger holds want records, or fails
// after the deadline.
func (o *outageLedger) waitForRecords(t *testing.T, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, distinct := o.counts()
		if n >= want || time.Now().After(deadline) {
			if n != want || distinct != n {
				t.Fatalf("the ledger holds %d records (%d distinct trace ids), want %d, each once", n, distinct, want)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outageChat sends one chat request with trace id trace and returns the
// status, or an error (it runs in the load's goroutines).
func outageChat(upstream, trace string) (int, error) {
	req, err := http.NewRequest("POST", gatewayURL()+"/chat/completions",
		bytes.NewReader([]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		return 0, err
	}
	for k, v := range map[string]string{"x-gateway-api-key": gatewayKey, "Content-Type": "application/json",
		"x-gateway-provider": "openai", "x-gateway-custom-host": upstream, "Authorization": "Bearer sk-test-provider",
		"x-gateway-trace-id": trace} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, nil
}

// metricValue reads one unlabelled series from the admin API's metrics.
func metricValue(t *testing.T, name string) float64 {
	t.Helper()
	code, body := getAdmin(t, "/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("metrics lack %s", name)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestLedgerStartsWithoutDatabase: a gateway whose ledger PostgreSQL is
// unreachable when it starts starts anyway and answers 200; its records
// wait in the spool, and all of them are written once the database is
// reachable.
func TestLedgerStartsWithoutDatabase(t *testing.T) {
	o := newOutageLedger(t)
	up := newFakeOpenAI(t)
	o.px.cut()
	if err := tryLoad(site{LLM: fmt.Sprintf("ledger %q", o.dsn)}); err != nil {
		t.Fatalf("the gateway did not start while its ledger database was unreachable: %v", err)
	}
	const n = 40
	for i := 0; i < n; i++ {
		if code, err := outageChat(up.URL, fmt.Sprintf("start-%d", i)); err != nil || code != 200 {
			t.Fatalf("request %d with the ledger database away: %d %v", i, code, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, "llm_ledger_spool_records") < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if v := metricValue(t, "llm_ledger_spool_records"); v != n {
		t.Fatalf("llm_ledger_spool_records = %v, want the %d records served", v, n)
	}
	if v := metricValue(t, "llm_ledger_store_up"); v != 0 {
		t.Errorf("llm_ledger_store_up = %v while the database is away", v)
	}
	if got, _ := o.counts(); got != 0 {
		t.Fatalf("the ledger holds %d records while its database is away", got)
	}
	if !strings.Contains(readLog(t), "usage ledger database unreachable; the gateway starts") {
		t.Error("the gateway did not say its ledger database is unreachable")
	}
	o.px.down.Store(false)
	o.waitForRecords(t, n, 30*time.Second)
}

// TestLedgerSurvivesDatabaseOutage cuts the ledger's PostgreSQL for 60 s
// (LEDGER_OUTAGE_SECONDS to change it) while requests keep arriving at a
// modest rate: every request is answered 200, and once the database is
// back the ledger holds exactly one record per request served. A cost
// usage limit on the key (its counter in Redis) counted every request
// through the outage: its used equals the ledger's cost to the
// nano-dollar, and once Redis loses the counter (deleted, as a restart
// without persistence would) the count rebuilt from the ledger is the
// same.
func TestLedgerSurvivesDatabaseOutage(t *testing.T) {
	rdb := requireRedis(t)
	o := newOutageLedger(t)
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{Redis: redisBlock(false) + fmt.Sprintf("\n\t\tledger %q", o.dsn), NoLimiter: true})
	status, m := api(t, gatewayKey, http.MethodPost, "/policies/usage-limits",
		`{"name":"outage","type":"cost","credit_limit":1000,"periodic_reset":"monthly","conditions":[{"key":"api_key","value":"test"}],"group_by":[{"key":"api_key"}]}`)
	if status != 200 {
		t.Fatalf("usage limit: %d %v", status, m)
	}
	limit := m["id"].(string)
	t.Cleanup(func() { api(t, gatewayKey, http.MethodDelete, "/policies/usage-limits/"+limit, "") })
	outage := 60 * time.Second
	if v, err := strconv.Atoi(os.Getenv("LEDGER_OUTAGE_SECONDS")); err == nil && v > 0 {
		outage = time.Duration(v) * time.Second
	}
	const workers = 4
	var (
		served, failed atomic.Int64
		stop           atomic.Bool
		wg             sync.WaitGroup
		firstErr       atomic.Value
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				code, err := outageChat(up.URL, fmt.Sprintf("outage-%d-%d", w, i))
				if err != nil || code != 200 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %v", code, err))
				} else {
					served.Add(1)
				}
				// Load shaping (about 100 requests a second in all), not
				// synchronisation.
				time.Sleep(40 * time.Millisecond)
			}
		}(w)
	}
	waitServed := func(n int64) {
		deadline := time.Now().Add(30 * time.Second)
		for served.Load() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitServed(50)
	dropped := metricValue(t, "llm_ledger_records_dropped_total")
	o.px.cut()
	cutAt := served.Load()
	time.Sleep(outage) // the outage itself
	duringOutage := served.Load() - cutAt
	spooled := metricValue(t, "llm_ledger_spool_records")
	o.px.down.Store(false)
	waitServed(served.Load() + 50)
	stop.Store(true)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d requests failed during the ledger outage (first: %v)", f, firstErr.Load())
	}
	t.Logf("%d requests served, %d during a %v outage; %v records in the spool at its end", served.Load(), duringOutage, outage, spooled)
	o.waitForRecords(t, int(served.Load()), 60*time.Second)
	if duringOutage == 0 || spooled == 0 {
		t.Fatalf("served %d requests and spooled %v records during the outage: the test did not exercise the spool", duringOutage, spooled)
	}
	if v := metricValue(t, "llm_ledger_records_dropped_total") - dropped; v != 0 {
		t.Errorf("llm_ledger_records_dropped_total rose by %v", v)
	}

	// Budgets: the live counter, then one rebuilt from the ledger.
	var ledgerNano int64
	if err := o.db.QueryRow("SELECT coalesce(sum(cost_nano_usd), 0) FROM " + o.schema + ".llm_ledger").Scan(&ledgerNano); err != nil {
		t.Fatal(err)
	}
	used := func() int64 { return int64(math.Round(usageOf(t, gatewayKey, limit).Used * budgets.NanoPerUSD)) }
	liveNano := used()
	ctx := context.Background()
	lost := 0
	for it := rdb.Scan(ctx, 0, "*"+limit+"*", 1000).Iterator(); it.Next(ctx); lost++ {
		rdb.Del(ctx, it.Val()) // the counter and its seed marker
	}
	// The instance looks at a counter's marker again within 10 s.
	rebuiltNano := used()
	for deadline := time.Now().Add(30 * time.Second); rebuiltNano != ledgerNano && time.Now().Before(deadline); rebuiltNano = used() {
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("ledger %d n$; the budget counted %d n$, and %d n$ once rebuilt from the ledger (%d Redis keys lost)", ledgerNano, liveNano, rebuiltNano, lost)
	if ledgerNano == 0 || lost == 0 || liveNano != ledgerNano || rebuiltNano != ledgerNano {
		t.Errorf("budgets after the outage: live %d n$, rebuilt %d n$ (%d keys lost), want the ledger's %d n$", liveNano, rebuiltNano, lost, ledgerNano)
	}
}

// TestLedgerSpoolSurvivesRestart runs the gateway binary with its ledger
// database unreachable, stops it (SIGTERM) and starts it again on the same
// data directory, still without the database: it starts both times,
// answers 200, keeps the first run's records in its spool (0600 files),
// and once the database is reachable writes both runs' records, each
// once.
func TestLedgerSpoolSurvivesRestart(t *testing.T) {
	o := newOutageLedger(t)
	up := newFakeOpenAI(t)
	bin := buildGateway(t)
	o.px.cut()
	dir := t.TempDir()
	port := freePort()
	s := rlSite{NoLimiter: true, Redis: fmt.Sprintf("ledger %q", o.dsn), Storage: filepath.Join(dir, "storage"),
		HTTPPort: port, AdminPort: freePort(), Log: filepath.Join(dir, "gw.log")}
	base := fmt.Sprintf("http://127.0.0.1:%d/v1", port)
	send := func(run string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			resp, raw, err := tryDo(base, "POST", "/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[]}`),
				"x-gateway-api-key", gatewayKey, "x-gateway-provider", "openai", "x-gateway-custom-host", up.URL,
				"Authorization", "Bearer sk-test-provider", "x-gateway-trace-id", fmt.Sprintf("%s-%d", run, i))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s request %d with the ledger database away: %v %s", run, i, err, raw)
			}
		}
	}
	p := startGateway(t, bin, dir, s.caddyfile(), port)
	send("first", 30)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the gateway did not stop:\n%s", p.out.String())
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "data", "caddy", "ledger-spool", "*", "*.seg"))
	if len(segs) == 0 {
		t.Fatalf("no spool segment left after the stop:\n%s", p.out.String())
	}
	for _, seg := range segs {
		if fi, err := os.Stat(seg); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("spool segment %s: %v %v, want -rw-------", filepath.Base(seg), fi.Mode(), err)
		}
	}
	if got, _ := o.counts(); got != 0 {
		t.Fatalf("the ledger holds %d records while its database is away", got)
	}
	startGateway(t, bin, dir, s.caddyfile(), port)
	send("second", 30)
	o.px.down.Store(false)
	o.waitForRecords(t, 60, 60*time.Second)
}
