package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// fakeStore answers pings with err, counts them, and blocks while hold
// is open.
type fakeStore struct {
	mu    sync.Mutex
	err   error
	hold  chan struct{}
	calls atomic.Int32
}

func (f *fakeStore) Ping(ctx context.Context) error {
	f.calls.Add(1)
	f.mu.Lock()
	err, hold := f.err, f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return err
}

func (f *fakeStore) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// clock is a test clock the checker reads.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestHandler(check string, stores ...store) (*Handler, *clock, *atomic.Bool) {
	h := &Handler{Check: check, logger: zap.NewNop()}
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	var exiting atomic.Bool
	h.exiting = exiting.Load
	h.checker = h.newChecker(stores)
	h.checker.now = clk.now
	return h, clk, &exiting
}

// probe sends one request through h and returns the status, body and
// whether the request was marked to skip the access log.
func probe(t *testing.T, h *Handler, method string) (int, string, bool) {
	t.Helper()
	vars := map[string]any{}
	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, vars)
	req := httptest.NewRequest(method, "/readyz", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	if err := h.ServeHTTP(rec, req, nil); err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}
	skip, _ := vars[caddyhttp.LogSkipVar].(bool)
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	return rec.Code, rec.Body.String(), skip
}

func TestHandlerAnswers(t *testing.T) {
	down := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused (password hunter2)")
	tests := []struct {
		name       string
		check      string
		method     string
		redisErr   error
		ledgerErr  error
		exiting    bool
		accessLog  bool
		failOn     []string
		wantStatus int
		wantBody   string
	}{
		{name: "live", check: CheckLive, method: "GET", wantStatus: 200, wantBody: `{"status":"ok"}`},
		{name: "live while draining", check: CheckLive, method: "GET", exiting: true, wantStatus: 200, wantBody: `{"status":"ok"}`},
		{name: "live with stores down", check: CheckLive, method: "GET", redisErr: down, wantStatus: 200, wantBody: `{"status":"ok"}`},
		{name: "live HEAD", check: CheckLive, method: "HEAD", wantStatus: 200, wantBody: ``},
		{name: "ready", check: CheckReady, method: "GET", wantStatus: 200, wantBody: `{"status":"ok"}`},
		{name: "ready HEAD", check: CheckReady, method: "HEAD", wantStatus: 200, wantBody: ``},
		{name: "redis down: degraded, still ready", check: CheckReady, method: "GET", redisErr: down, wantStatus: 200, wantBody: `{"status":"degraded","degraded":["redis"]}`},
		{name: "ledger down: degraded, still ready", check: CheckReady, method: "GET", ledgerErr: down, wantStatus: 200, wantBody: `{"status":"degraded","degraded":["ledger"]}`},
		{name: "both down: degraded", check: CheckReady, method: "GET", redisErr: down, ledgerErr: down, wantStatus: 200, wantBody: `{"status":"degraded","degraded":["redis","ledger"]}`},
		{name: "redis down, fail_on redis", check: CheckReady, method: "GET", redisErr: down, failOn: []string{"redis"}, wantStatus: 503, wantBody: `{"status":"not_ready","failing":["redis"]}`},
		{name: "ledger down, fail_on redis", check: CheckReady, method: "GET", ledgerErr: down, failOn: []string{"redis"}, wantStatus: 200, wantBody: `{"status":"degraded","degraded":["ledger"]}`},
		{name: "both down, fail_on ledger", check: CheckReady, method: "GET", redisErr: down, ledgerErr: down, failOn: []string{"ledger"}, wantStatus: 503, wantBody: `{"status":"not_ready","failing":["ledger"],"degraded":["redis"]}`},
		{name: "both down, fail_on both", check: CheckReady, method: "GET", redisErr: down, ledgerErr: down, failOn: []string{"redis", "ledger"}, wantStatus: 503, wantBody: `{"status":"not_ready","failing":["redis","ledger"]}`},
		{name: "draining with fail_on", check: CheckReady, method: "GET", exiting: true, failOn: []string{"redis"}, wantStatus: 503, wantBody: `{"status":"not_ready","failing":["draining"]}`},
		{name: "draining", check: CheckReady, method: "GET", exiting: true, wantStatus: 503, wantBody: `{"status":"not_ready","failing":["draining"]}`},
		{name: "logged when asked", check: CheckReady, method: "GET", accessLog: true, wantStatus: 200, wantBody: `{"status":"ok"}`},
		{name: "POST refused", check: CheckReady, method: "POST", wantStatus: 405, wantBody: `"type":"invalid_request_error"`},
		{name: "DELETE refused on live", check: CheckLive, method: "DELETE", wantStatus: 405, wantBody: `"error":{`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			redis, ledger := &fakeStore{err: tc.redisErr}, &fakeStore{err: tc.ledgerErr}
			h, _, exiting := newTestHandler(tc.check,
				store{StoreRedis, redis, slices.Contains(tc.failOn, StoreRedis)},
				store{StoreLedger, ledger, slices.Contains(tc.failOn, StoreLedger)})
			h.AccessLog = tc.accessLog
			exiting.Store(tc.exiting)
			status, body, skip := probe(t, h, tc.method)
			if status != tc.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", status, tc.wantStatus, body)
			}
			if tc.wantBody == "" || tc.wantStatus == 405 {
				if !strings.Contains(body, tc.wantBody) {
					t.Errorf("body = %q, want it to contain %q", body, tc.wantBody)
				}
			} else if body != tc.wantBody {
				t.Errorf("body = %q, want %q", body, tc.wantBody)
			}
			if tc.method == "HEAD" && body != "" {
				t.Errorf("HEAD answered a body: %q", body)
			}
			if skip == tc.accessLog {
				t.Errorf("log skip = %v with access_log %v", skip, tc.accessLog)
			}
			for _, leak := range []string{"10.0.0.7", "hunter2", "refused"} {
				if strings.Contains(body, leak) {
					t.Errorf("the answer leaks %q: %s", leak, body)
				}
			}
			if tc.check == CheckLive && redis.calls.Load() != 0 {
				t.Errorf("live pinged a store")
			}
		})
	}
}

func TestReadyWithoutStores(t *testing.T) {
	h, _, _ := newTestHandler(CheckReady)
	if status, body, _ := probe(t, h, "GET"); status != 200 || body != `{"status":"ok"}` {
		t.Fatalf("no stores: %d %s", status, body)
	}
}

// TestReadyCachesRounds: probes within the cache period share one round
// of pings; the next period pings again and sees the store's new state.
func TestReadyCachesRounds(t *testing.T) {
	redis := &fakeStore{}
	h, clk, _ := newTestHandler(CheckReady, store{StoreRedis, redis, true})
	for i := 0; i < 50; i++ {
		if status, _, _ := probe(t, h, "GET"); status != 200 {
			t.Fatalf("probe %d: %d", i, status)
		}
	}
	if n := redis.calls.Load(); n != 1 {
		t.Fatalf("50 probes in one period pinged %d times, want 1", n)
	}
	redis.set(errors.New("down"))
	if status, _, _ := probe(t, h, "GET"); status != 200 {
		t.Fatalf("within the period the cached round answers; got %d", status)
	}
	clk.add(DefaultCache)
	if status, body, _ := probe(t, h, "GET"); status != 503 || !strings.Contains(body, `"redis"`) {
		t.Fatalf("after the period: %d %s", status, body)
	}
	redis.set(nil)
	clk.add(DefaultCache)
	if status, _, _ := probe(t, h, "GET"); status != 200 {
		t.Fatalf("recovered: %d", status)
	}
	if n := redis.calls.Load(); n != 3 {
		t.Fatalf("three periods pinged %d times, want 3", n)
	}
}

// TestReadyConcurrentProbesShareRound: probes arriving while a round runs
// wait for it instead of starting their own.
func TestReadyConcurrentProbesShareRound(t *testing.T) {
	redis := &fakeStore{hold: make(chan struct{})}
	h, _, _ := newTestHandler(CheckReady, store{StoreRedis, redis, true})
	h.checker.timeout = time.Hour // the hold, not the timeout, ends the round
	const n = 20
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _, _ = probe(t, h, "GET")
		}()
	}
	// Release once the first round has started.
	for redis.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(redis.hold)
	wg.Wait()
	for i, s := range statuses {
		if s != 200 {
			t.Errorf("probe %d: %d", i, s)
		}
	}
	if c := redis.calls.Load(); c != 1 {
		t.Fatalf("%d concurrent probes pinged %d times, want 1", n, c)
	}
}

// TestReadyHungStoreTimesOut: a store that never answers (nor honours
// its context) fails the round at the timeout instead of hanging the
// probe.
func TestReadyHungStoreTimesOut(t *testing.T) {
	hung := &fakeStore{hold: make(chan struct{})}
	defer close(hung.hold)
	h, _, _ := newTestHandler(CheckReady, store{StoreRedis, &fakeStore{}, true}, store{StoreLedger, hung, true})
	h.checker.timeout = 20 * time.Millisecond
	status, body, _ := probe(t, h, "GET")
	if status != 503 || body != `{"status":"not_ready","failing":["ledger"]}` {
		t.Fatalf("hung ledger: %d %s", status, body)
	}
}

// TestReadyProbeCancelled: a probe whose client leaves while another
// probe's first round runs answers 503 without waiting for the round.
func TestReadyProbeCancelled(t *testing.T) {
	redis := &fakeStore{hold: make(chan struct{})}
	h, _, _ := newTestHandler(CheckReady, store{StoreRedis, redis, true})
	h.checker.timeout = time.Hour
	first := make(chan struct{})
	go func() {
		defer close(first)
		h.checker.check(context.Background())
	}()
	for redis.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := h.checker.check(ctx); ok {
		t.Fatal("a cancelled probe got a result before the first round ended")
	}
	close(redis.hold)
	<-first
}

// TestReadyLogsTransitions: a change of the answer is logged once, with
// the store's error (for operators), and a steady state is not logged,
// whether the store fails readiness (fail_on) or only degrades it.
func TestReadyLogsTransitions(t *testing.T) {
	for _, tc := range []struct {
		fails bool
		warn  string
	}{
		{fails: true, warn: "warn not ready: a shared store named in fail_on does not answer"},
		{fails: false, warn: "warn degraded: a shared store does not answer; still ready, since every replica shares it"},
	} {
		t.Run(fmt.Sprintf("fails=%v", tc.fails), func(t *testing.T) {
			redis := &fakeStore{}
			h, clk, _ := newTestHandler(CheckReady)
			var mu sync.Mutex
			var logged []string
			h.logger = zap.NewExample(zap.Hooks(func(e zapcore.Entry) error {
				mu.Lock()
				logged = append(logged, e.Level.String()+" "+e.Message)
				mu.Unlock()
				return nil
			}))
			h.checker = h.newChecker([]store{{StoreRedis, redis, tc.fails}})
			h.checker.now = clk.now
			steps := []error{nil, nil, errors.New("down"), errors.New("down"), errors.New("down"), nil}
			for _, err := range steps {
				redis.set(err)
				probe(t, h, "GET")
				clk.add(time.Hour)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{tc.warn, "info ready: every shared store answers"}
			if strings.Join(logged, "|") != strings.Join(want, "|") {
				t.Fatalf("logged %q, want %q", logged, want)
			}
		})
	}
}

// TestStoreUpGauge: each round sets llm_gateway_store_up for each store,
// 0 while it does not answer and 1 once it does again.
func TestStoreUpGauge(t *testing.T) {
	redis := &fakeStore{err: errors.New("down")}
	h, clk, _ := newTestHandler(CheckReady, store{StoreRedis, redis, false})
	h.checker.observe = observeStore
	probe(t, h, "GET")
	if v := testutil.ToFloat64(storeUp.WithLabelValues(StoreRedis)); v != 0 {
		t.Fatalf("store down: gauge %v, want 0", v)
	}
	redis.set(nil)
	clk.add(time.Hour)
	probe(t, h, "GET")
	if v := testutil.ToFloat64(storeUp.WithLabelValues(StoreRedis)); v != 1 {
		t.Fatalf("store up: gauge %v, want 1", v)
	}
}

func TestValidate(t *testing.T) {
	neg := caddy.Duration(-1)
	big := caddy.Duration(2 * MaxCache)
	tests := []struct {
		name string
		h    Handler
		ok   bool
	}{
		{"live", Handler{Check: "live"}, true},
		{"ready", Handler{Check: "ready"}, true},
		{"empty check", Handler{}, false},
		{"unknown check", Handler{Check: "startup"}, false},
		{"negative timeout", Handler{Check: "ready", Timeout: -1}, false},
		{"huge timeout", Handler{Check: "ready", Timeout: caddy.Duration(time.Hour)}, false},
		{"negative cache", Handler{Check: "ready", Cache: &neg}, false},
		{"huge cache", Handler{Check: "ready", Cache: &big}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.h.validate(); (err == nil) != tc.ok {
				t.Fatalf("validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestProbeAllocations: a probe answered from the cached round allocates
// nothing in the handler itself beyond the test's request plumbing.
func TestProbeAllocations(t *testing.T) {
	h, _, _ := newTestHandler(CheckReady, store{StoreRedis, &fakeStore{}, false})
	vars := map[string]any{}
	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, vars)
	req := httptest.NewRequest("GET", "/readyz", nil).WithContext(ctx)
	w := discardWriter{h: http.Header{}}
	_ = h.ServeHTTP(w, req, nil) // the first round
	allocs := testing.AllocsPerRun(100, func() { _ = h.ServeHTTP(w, req, nil) })
	if allocs > 0 {
		t.Fatalf("a cached probe allocates %.0f times", allocs)
	}
}

type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d discardWriter) WriteHeader(int)             {}
