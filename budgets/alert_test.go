package budgets

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/redistest"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
)

var testSecret = []byte("alert-secret-0123456789")

// hookReceiver records the webhook calls it gets; status (nil: 200)
// answers the nth call (from 1).
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	calls  []hookCall
	status func(n int) int
}

type hookCall struct {
	header http.Header
	body   []byte
	alert  Alert
}

func newHookReceiver(t *testing.T, status func(n int) int) *hookReceiver {
	h := &hookReceiver{status: status}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var al Alert
		_ = json.Unmarshal(b, &al)
		h.mu.Lock()
		h.calls = append(h.calls, hookCall{r.Header.Clone(), b, al})
		n := len(h.calls)
		h.mu.Unlock()
		if h.status != nil {
			w.WriteHeader(h.status(n))
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) got() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookCall(nil), h.calls...)
}

func (h *hookReceiver) events() string {
	var evs []string
	for _, c := range h.got() {
		evs = append(evs, c.alert.Event)
	}
	return strings.Join(evs, ",")
}

// grantOf is a grant of u for key k in the period holding now.
func grantOf(u *UsageLimit, k string, now time.Time) *Grant {
	per := u.PeriodAt(now)
	return &Grant{Limit: u, Key: counterKey(u, u.Policy().GroupKey(attrs(k)), per.Label), Period: per, At: now}
}

// TestAlertSignatureVerifies signs a delivered alert with the secret: the
// documented procedure (HMAC-SHA256 over timestamp "." body) reproduces
// the header, VerifyAlert accepts it, and a tampered body, another secret,
// another timestamp or a stale one are refused.
func TestAlertSignatureVerifies(t *testing.T) {
	h := newHookReceiver(t, nil)
	threshold := 0.03
	u := costLimit(t, 0.10, &threshold)
	now := time.Now()
	a := NewAlerter(h.URL, h.Client(), NewMemoryOnce(nil), nil, WithSecret(testSecret))
	a.Fire(context.Background(), grantOf(u, "k", now), 40_000_000)
	a.Wait()
	calls := h.got()
	if len(calls) != 1 {
		t.Fatalf("%d calls, want 1", len(calls))
	}
	c := calls[0]
	ts, sig := c.header.Get("X-Gateway-Timestamp"), c.header.Get("X-Gateway-Signature")
	m := hmac.New(sha256.New, testSecret)
	m.Write([]byte(ts + "." + string(c.body)))
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); sig != want {
		t.Fatalf("signature %q, want %q (timestamp %q)", sig, want, ts)
	}
	if c.header.Get("X-Gateway-Event") != EventThreshold || c.alert.Event != EventThreshold || c.alert.Used == nil || *c.alert.Used != 0.04 {
		t.Errorf("event header %q, body %s", c.header.Get("X-Gateway-Event"), c.body)
	}
	if strings.Contains(string(c.body), string(testSecret)) || strings.Contains(c.header.Get("X-Gateway-Signature"), string(testSecret)) {
		t.Error("the secret is in the call")
	}
	if err := VerifyAlert(testSecret, ts, sig, c.body, time.Now()); err != nil {
		t.Fatalf("the alert as received does not verify: %v", err)
	}
	tampered := strings.Replace(string(c.body), `"used":0.04`, `"used":0.01`, 1)
	if tampered == string(c.body) {
		t.Fatalf("nothing to tamper with in %s", c.body)
	}
	for _, tc := range []struct {
		name     string
		secret   []byte
		ts, body string
		now      time.Time
		want     error
	}{
		{"tampered body", testSecret, ts, tampered, time.Now(), ErrAlertSignature},
		{"another secret", []byte("another-secret-0123456"), ts, string(c.body), time.Now(), ErrAlertSignature},
		{"another timestamp", testSecret, strconv.FormatInt(mustInt(t, ts)-1, 10), string(c.body), time.Now(), ErrAlertSignature},
		{"replayed after 5 minutes", testSecret, ts, string(c.body), time.Now().Add(AlertMaxAge + time.Minute), ErrAlertStale},
		{"not a timestamp", testSecret, "soon", string(c.body), time.Now(), ErrAlertStale},
	} {
		if err := VerifyAlert(tc.secret, tc.ts, sig, []byte(tc.body), tc.now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAlertEventsOnceAcrossAlerters runs two alerters (two instances) on
// one shared Once and Marks, in process and on Redis: each fires at every
// step, and the receiver gets threshold, exhausted and, once the period
// ended, reset, each exactly once, in that order, with the documented
// fields.
func TestAlertEventsOnceAcrossAlerters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state func(t *testing.T, now func() time.Time) (Once, Marks)
	}{
		{"memory", func(t *testing.T, now func() time.Time) (Once, Marks) {
			return NewMemoryOnce(now), NewMemoryMarks()
		}},
		{"redis", func(t *testing.T, now func() time.Time) (Once, Marks) {
			c := redistest.Client(t, 0)
			prefix := "alerttest-" + uuid.NewString() + ":"
			t.Cleanup(func() {
				keys, _ := c.Keys(context.Background(), prefix+"*").Result()
				if len(keys) > 0 {
					c.Del(context.Background(), keys...)
				}
			})
			return RedisOnce{Client: c, Prefix: prefix}, RedisMarks{Client: c, Prefix: prefix}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHookReceiver(t, nil)
			var clock atomic.Pointer[time.Time]
			t0 := time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC)
			clock.Store(&t0)
			now := func() time.Time { return *clock.Load() }
			once, marks := tc.state(t, now)
			threshold := 0.05
			u := costLimit(t, 0.10, &threshold)
			name := "team"
			u.Name, u.WorkspaceID, u.OrganisationID = &name, "ws-1", "org-1"
			a1 := NewAlerter(h.URL, h.Client(), once, nil, WithSecret(testSecret), WithMarks(marks), WithClock(now))
			// a2 never manages to forget a mark: as an instance that read it
			// before another sent its reset, it finds it again.
			a2 := NewAlerter(h.URL, h.Client(), once, nil, WithSecret(testSecret), WithMarks(stickyMarks{marks}), WithClock(now))
			ctx := context.Background()
			g := grantOf(u, "k", t0)
			both := func(used int64) {
				for _, a := range []*Alerter{a1, a2} {
					a.Fire(ctx, g, used)
					a.Wait()
				}
			}
			both(40_000_000) // below the threshold (nano-dollars)
			both(50_000_000) // at it
			both(70_000_000)
			both(100_000_000) // the limit
			both(120_000_000)
			for _, a := range []*Alerter{a1, a2} {
				a.sweep(ctx) // the period has not ended
				a.Wait()
			}
			if got := h.events(); got != "threshold,exhausted" {
				t.Fatalf("events %q within the period, want threshold,exhausted", got)
			}
			t1 := g.Period.End.Add(time.Second)
			clock.Store(&t1)
			for _, a := range []*Alerter{a2, a1, a2} {
				a.sweep(ctx)
				a.Wait()
			}
			calls := h.got()
			if got := h.events(); got != "threshold,exhausted,reset" {
				t.Fatalf("events %q, want threshold,exhausted,reset", got)
			}
			th, ex, re := calls[0].alert, calls[1].alert, calls[2].alert
			if *th.Used != 0.05 || *ex.Used != 0.1 || re.Used != nil {
				t.Errorf("used %v %v %v, want 0.05, 0.1 and null", *th.Used, *ex.Used, re.Used)
			}
			if th.PeriodStart != "2026-03-01T00:00:00Z" || th.PeriodEnd != "2026-04-01T00:00:00Z" ||
				re.PeriodStart != "2026-04-01T00:00:00Z" || re.PeriodEnd != "2026-05-01T00:00:00Z" {
				t.Errorf("periods %s–%s, reset %s–%s", th.PeriodStart, th.PeriodEnd, re.PeriodStart, re.PeriodEnd)
			}
			for _, al := range []Alert{th, ex, re} {
				if al.PolicyID != u.ID || al.Name == nil || *al.Name != "team" || al.Group != groupOf(unitless(g.Key)) || strings.Contains(al.Group, "nano") || strings.Contains(al.Group, "2026") ||
					al.WorkspaceID != "ws-1" || al.OrganisationID != "org-1" || al.CreditLimit != 0.1 || al.ID == "" {
					t.Errorf("%s alert %+v", al.Event, al)
				}
			}
			if th.ID == ex.ID || ex.ID == re.ID {
				t.Error("two events share an id")
			}
			if due, _ := marks.Due(ctx, t1, 10); len(due) != 0 {
				t.Errorf("%d marks left after the reset", len(due))
			}
		})
	}
}

// stickyMarks forgets nothing.
type stickyMarks struct{ Marks }

func (stickyMarks) Remove(context.Context, AlertMark) error { return nil }

// TestAlertExhaustedWithoutThreshold spends a limit that has no alert
// threshold through the enforcer: the exhausted event is sent, once, and
// no threshold event.
func TestAlertExhaustedWithoutThreshold(t *testing.T) {
	h := newHookReceiver(t, nil)
	now := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	u := costLimit(t, 0.05, nil)
	al := NewAlerter(h.URL, h.Client(), NewMemoryOnce(clock), nil, WithSecret(testSecret))
	e := NewEnforcer(policies.NewMemoryLimiter(policies.WithClock(clock)), fixedSource{u}, al, clock)
	ctx := context.Background()
	for i := 0; i < 8; i++ {
		adm, refusal, _ := e.Admit(ctx, attrs("k"), Reserve{NanoUSD: 10_000_000})
		if refusal != nil {
			break
		}
		adm.Settle(ctx, costing(0.01))
	}
	al.Wait()
	if got := h.events(); got != "exhausted" {
		t.Fatalf("events %q, want exhausted", got)
	}
}

// TestAlertDeliveryRetries answers the webhook with a table of statuses:
// a transient failure is retried with backoff until it passes, at most
// AlertAttempts times; a refusal is not retried; what never passed is
// counted as failed.
func TestAlertDeliveryRetries(t *testing.T) {
	threshold := 0.01
	for _, tc := range []struct {
		name      string
		status    func(n int) int
		calls     int
		delivered bool
	}{
		{"passes at once", nil, 1, true},
		{"503 twice then 200", func(n int) int { return map[bool]int{true: 503, false: 200}[n <= 2] }, 3, true},
		{"429 then 200", func(n int) int { return map[bool]int{true: 429, false: 200}[n <= 1] }, 2, true},
		{"always 500", func(int) int { return 500 }, AlertAttempts, false},
		{"401 is not retried", func(int) int { return 401 }, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHookReceiver(t, tc.status)
			a := NewAlerter(h.URL, h.Client(), NewMemoryOnce(nil), nil, WithSecret(testSecret))
			a.backoff = time.Millisecond
			delivered := testutil.ToFloat64(alertsTotal.WithLabelValues(EventThreshold, "delivered"))
			failed := testutil.ToFloat64(alertsTotal.WithLabelValues(EventThreshold, "failed"))
			a.Fire(context.Background(), grantOf(costLimit(t, 1, &threshold), "k", time.Now()), 20_000_000)
			a.Wait()
			if n := len(h.got()); n != tc.calls {
				t.Errorf("%d calls, want %d", n, tc.calls)
			}
			dd := testutil.ToFloat64(alertsTotal.WithLabelValues(EventThreshold, "delivered")) - delivered
			df := testutil.ToFloat64(alertsTotal.WithLabelValues(EventThreshold, "failed")) - failed
			if tc.delivered && (dd != 1 || df != 0) || !tc.delivered && (dd != 0 || df != 1) {
				t.Errorf("counted %v delivered, %v failed", dd, df)
			}
			// Every attempt is signed afresh and verifies.
			for _, c := range h.got() {
				if err := VerifyAlert(testSecret, c.header.Get(HeaderTimestamp), c.header.Get(HeaderSignature), c.body, time.Now()); err != nil {
					t.Errorf("attempt does not verify: %v", err)
				}
			}
		})
	}
}

// TestAlertQueueBounded holds the receiver while more alerts than the
// queue holds are raised for one group: the excess is dropped and
// counted, what was queued is delivered in order.
func TestAlertQueueBounded(t *testing.T) {
	release, first := make(chan struct{}), make(chan struct{}, 1)
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case first <- struct{}{}:
		default:
		}
		<-release
		var al Alert
		_ = json.NewDecoder(r.Body).Decode(&al)
		mu.Lock()
		got = append(got, al.ID)
		mu.Unlock()
	}))
	defer srv.Close()
	a := NewAlerter(srv.URL, srv.Client(), NewMemoryOnce(nil), nil, WithSecret(testSecret))
	dropped := testutil.ToFloat64(alertsTotal.WithLabelValues(EventExhausted, "dropped"))
	var sent []string
	const n = maxAlertQueued + 5
	for i := 0; i < n; i++ {
		id := uuid.NewString()
		a.queue.push(a, "budget|limit|api_key=k|2026-03", []Alert{{ID: id, Event: EventExhausted}})
		sent = append(sent, id)
		if i == 0 {
			<-first // in flight: the others queue behind it
		}
	}
	close(release)
	a.Wait()
	// The first is in flight when the others queue; 256 wait; 4 drop.
	if d := testutil.ToFloat64(alertsTotal.WithLabelValues(EventExhausted, "dropped")) - dropped; d != n-maxAlertQueued-1 {
		t.Errorf("%v dropped, want %d", d, n-maxAlertQueued-1)
	}
	if strings.Join(got, ",") != strings.Join(sent[:maxAlertQueued+1], ",") {
		t.Errorf("delivered %d alerts, not the first %d in order", len(got), maxAlertQueued+1)
	}
}
