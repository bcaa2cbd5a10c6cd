package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const cb2 = `"cb_config":{"failure_threshold":2,"cooldown_interval":30000}`

// TestBreakerOpensSkipsAndCloses walks a breaker through its life on the
// test clock: two failures open it, the open target is skipped without a
// call, and after the cooldown one trial closes it again.
func TestBreakerOpensSkipsAndCloses(t *testing.T) {
	clk := useTestClock(t)
	a, b := newScripted(t, reply{status: 500}), newScripted(t)
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"fallback"},` + cb2 + `,"targets":[` + target(a.fakeOpenAI, "") + `,` + target(b.fakeOpenAI, "") + `]}`

	for i := range 2 {
		resp, raw := chat(t, cfg)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	if a.count() != 2 {
		t.Fatalf("a hit %d times before opening", a.count())
	}
	resp, _ := chat(t, cfg)
	wantHeaders(t, resp, "x-gateway-last-used-option-index", "config.targets[1]")
	if a.count() != 2 {
		t.Fatal("an open target was called")
	}
	if got := lastAttempts(t); got != "config.targets[0]:breaker_open:0 config.targets[1]:ok:200" {
		t.Fatalf("attempts %s", got)
	}
	if !strings.Contains(readLog(t), `"msg":"circuit breaker state changed"`) {
		t.Fatal("the state change was not logged")
	}

	clk.advance(29 * time.Second)
	chat(t, cfg)
	if a.count() != 2 {
		t.Fatal("called before the cooldown ended")
	}
	clk.advance(time.Second)
	a.set(reply{}) // a has recovered
	resp, _ = chat(t, cfg)
	wantHeaders(t, resp, "x-gateway-last-used-option-index", "config.targets[0]")
	if a.count() != 3 {
		t.Fatalf("the half-open trial did not reach a (%d calls)", a.count())
	}
	a.set(reply{status: 500})
	chat(t, cfg) // closed again: a single failure does not open it
	chat(t, cfg)
	if a.count() != 5 {
		t.Fatalf("a should be tried while closed: %d calls", a.count())
	}
}

func TestBreakerAllOpenIs503(t *testing.T) {
	useTestClock(t)
	a, b := newScripted(t, reply{status: 503}), newScripted(t, reply{status: 429})
	loadFresh(t, site{})
	cfg := `{"strategy":{"mode":"loadbalance"},` + cb2 + `,"targets":[` + target(a.fakeOpenAI, "") + `,` + target(b.fakeOpenAI, "") + `]}`
	for range 8 { // enough for both to see two failures
		chat(t, cfg)
	}
	if a.count() < 2 || b.count() < 2 {
		t.Fatalf("a=%d b=%d", a.count(), b.count())
	}
	before := a.count() + b.count()
	resp, raw := chat(t, cfg)
	assertGatewayError(t, resp.StatusCode, resp.Header.Get("x-gateway-error"), raw, 503, "service_unavailable")
	if !strings.Contains(string(raw), "config.targets[0], config.targets[1]") {
		t.Fatalf("the 503 must name the open targets: %s", raw)
	}
	if a.count()+b.count() != before {
		t.Fatal("an open target was called")
	}
	wantHeaders(t, resp, "x-gateway-cache-status", "DISABLED")
}

// TestBreakerSurvivesReload: an open breaker stays open across a reload
// by caddy.Load and by the admin API's POST /load, and is shared by the
// routes of the new config.
func TestBreakerSurvivesReload(t *testing.T) {
	useTestClock(t)
	a := newScripted(t, reply{status: 500})
	loadFresh(t, site{})
	cfg := `{` + cb2 + `,"strategy":{"mode":"single"},"targets":[` + target(a.fakeOpenAI, "") + `]}`
	chat(t, cfg)
	chat(t, cfg)
	if resp, _ := chat(t, cfg); resp.StatusCode != 503 || a.count() != 2 {
		t.Fatalf("not open: %d after %d calls", resp.StatusCode, a.count())
	}

	loadFresh(t, site{LLM: "api_key second second-key-0123456789"})
	if resp, _ := chat(t, cfg); resp.StatusCode != 503 || a.count() != 2 {
		t.Fatalf("caddy.Load reset the breaker: %d after %d calls", resp.StatusCode, a.count())
	}

	adminLoad(t, site{Before: "handle /other/* {\n\t\tllm_gateway\n\t}"})
	if resp, _ := chat(t, cfg); resp.StatusCode != 503 || a.count() != 2 {
		t.Fatalf("POST /load reset the breaker: %d after %d calls", resp.StatusCode, a.count())
	}
}

// adminLoad loads a site through the admin API, as an operator's reload
// would.
func adminLoad(t testing.TB, s site) {
	t.Helper()
	cfg, err := adapt(s.caddyfile())
	if err != nil {
		t.Fatal(err)
	}
	truncateLog()
	req, _ := http.NewRequest("POST", "http://localhost:"+itoa(adminPort)+"/load", strings.NewReader(string(cfg)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /load: %d", resp.StatusCode)
	}
	settleReload()
}
