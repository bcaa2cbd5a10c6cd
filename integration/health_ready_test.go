package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/health"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
)

// healthRoutes are the probe routes of the examples' Caddyfile, plus a
// readiness route that keeps its probes in the access log.
const healthRoutes = `
	log {
		output file %s
		format json
	}
	handle /healthz {
		llm_health live
	}
	handle /readyz {
		llm_health ready {
			timeout 300ms
			cache 0s
		}
	}
	handle /readyz-logged {
		llm_health ready {
			access_log
		}
	}
	handle /readyz-strict {
		llm_health ready {
			timeout 300ms
			cache 0s
			fail_on redis ledger
		}
	}
`

// TestHealthReadyRedis runs the probes through a real Caddy whose llm app
// shares a real Redis (fail_open) reached through a proxy the test can
// cut: ready answers 200 ok while Redis answers; once Redis stops
// answering it stays 200 and reports redis as degraded (every replica
// shares Redis, so failing readiness would pull the whole fleet) while
// the gateway keeps serving, and a probe with fail_on redis answers 503
// naming redis (and nothing more), within the configured timeout rather
// than hanging; both answer 200 ok when Redis is back; liveness stays 200
// all along and probes stay out of the access log.
func TestHealthReadyRedis(t *testing.T) {
	redistest.Require(t)
	px := newCutProxy(t, redistest.Addr())
	up := newFakeOpenAI(t)
	loadFresh(t, site{
		LLM:    fmt.Sprintf("redis %s {\n\t\t\tdb %d\n\t\t\tfail_open\n\t\t}", px.addr(), rlRedisDB),
		Before: fmt.Sprintf(healthRoutes, logPath),
	})

	if status, body := probeHealth(t, "/readyz"); status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("ready with Redis up: %d %s", status, body)
	}
	if status, body := probeHealth(t, "/healthz"); status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("live: %d %s", status, body)
	}

	// Redis stops answering: connections are accepted and never served,
	// so only the probe's timeout ends the ping.
	px.hold.Store(true)
	px.cut()
	status, body := probeHealth(t, "/readyz")
	if status != 200 || body != `{"status":"degraded","degraded":["redis"]}` {
		t.Fatalf("ready with Redis unreachable under fail_open: %d %s, want 200 degraded", status, body)
	}
	status, body = probeHealth(t, "/readyz-strict")
	if status != 503 || body != `{"status":"not_ready","failing":["redis"]}` {
		t.Fatalf("fail_on redis with Redis unreachable: %d %s", status, body)
	}
	if strings.Contains(body, px.addr()) || strings.Contains(body, "timeout") {
		t.Fatalf("the 503 names more than the store: %s", body)
	}
	if status, _ := probeHealth(t, "/healthz"); status != 200 {
		t.Fatalf("live while Redis is down: %d", status)
	}
	// The instance the probe keeps in rotation serves.
	resp, b := do(t, "POST", "/chat/completions", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`),
		"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL, "Authorization", "Bearer sk-test-provider")
	if resp.StatusCode != 200 {
		t.Fatalf("a request while Redis is down (fail_open): %d %s", resp.StatusCode, b)
	}
	if got, ok := scrapeMetrics(t)[`llm_gateway_store_up{store="redis"}`]; !ok || got != 0 {
		t.Fatalf("llm_gateway_store_up{store=redis} = %v (present %v) while Redis is down, want 0", got, ok)
	}

	px.down.Store(false)
	for _, path := range []string{"/readyz", "/readyz-strict"} {
		ok := false
		for i := 0; i < 100 && !ok; i++ {
			status, body = probeHealth(t, path)
			ok = status == 200 && body == `{"status":"ok"}`
			if !ok {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if !ok {
			t.Fatalf("%s did not recover with Redis back: %d %s", path, status, body)
		}
	}
	if got := scrapeMetrics(t)[`llm_gateway_store_up{store="redis"}`]; got != 1 {
		t.Fatalf("llm_gateway_store_up{store=redis} = %v with Redis back, want 1", got)
	}

	// Probes are skipped from the access log unless access_log is set.
	if status, _ := probeHealth(t, "/readyz-logged"); status != 200 {
		t.Fatalf("logged probe: %d", status)
	}
	logged := false
	for i := 0; i < 100 && !logged; i++ {
		logged = strings.Contains(readLog(t), `"uri":"/readyz-logged"`)
	}
	log := readLog(t)
	if !logged {
		t.Fatalf("the access_log probe is not in the access log:\n%s", log)
	}
	for _, uri := range []string{`"uri":"/readyz"`, `"uri":"/healthz"`} {
		if strings.Contains(log, uri) {
			t.Errorf("%s is in the access log", uri)
		}
	}
	if !strings.Contains(log, "degraded: a shared store does not answer") || !strings.Contains(log, "not ready: a shared store named in fail_on does not answer") ||
		!strings.Contains(log, "ready: every shared store answers") {
		t.Errorf("the readiness changes are not logged:\n%s", log)
	}
}

// TestHealthWithoutSharedStores: with no Redis and no ledger, ready only
// needs the config loaded; a POST gets the OpenAI error envelope.
func TestHealthWithoutSharedStores(t *testing.T) {
	loadFresh(t, site{Before: fmt.Sprintf(healthRoutes, logPath)})
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body := probeHealth(t, path); status != 200 || body != `{"status":"ok"}` {
			t.Fatalf("%s: %d %s", path, status, body)
		}
	}
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort), "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || !strings.Contains(string(b), `"error":{`) || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /readyz: %d %s", resp.StatusCode, b)
	}
}

// probeHealth GETs a probe path of the site; the client's timeout only
// guards the test against a hang.
func probeHealth(t *testing.T, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, path))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthReadyLedger: with the usage ledger in PostgreSQL, readiness
// reports the ledger's database as it does Redis: 200 degraded while
// PostgreSQL does not answer (503 naming ledger with fail_on ledger), 200
// ok once it does.
func TestHealthReadyLedger(t *testing.T) {
	var _ health.Pinger = (*ledger.DB)(nil)
	dsn := ledgerPostgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	px := newCutProxy(t, u.Host)
	u.Host = px.addr()
	loadFresh(t, site{
		LLM:    fmt.Sprintf("ledger %q", u.String()),
		Before: fmt.Sprintf(healthRoutes, logPath),
	})
	if status, body := probeHealth(t, "/readyz"); status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("ready with PostgreSQL up: %d %s", status, body)
	}
	px.hold.Store(true)
	px.cut()
	if status, body := probeHealth(t, "/readyz"); status != 200 || body != `{"status":"degraded","degraded":["ledger"]}` {
		t.Fatalf("ready with PostgreSQL unreachable: %d %s, want 200 degraded", status, body)
	}
	if status, body := probeHealth(t, "/readyz-strict"); status != 503 || body != `{"status":"not_ready","failing":["ledger"]}` {
		t.Fatalf("fail_on ledger with PostgreSQL unreachable: %d %s", status, body)
	}
	px.down.Store(false)
	status, body := 0, ""
	for i := 0; i < 100 && status != 200; i++ {
		if status, body = probeHealth(t, "/readyz"); status != 200 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("ready did not recover with PostgreSQL back: %d %s", status, body)
	}
}
