package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// clock is a settable clock for the session store and its throttle.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func withClock(h *Handler) *clock {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	h.sessions.now = c.now
	return c
}

// from sets the request's client address as Caddy does (client_ip,
// which honours trusted_proxies).
func from(ip string) func(*http.Request) {
	return func(r *http.Request) {
		r.RemoteAddr = "10.9.9.9:1234" // the proxy's, not the client's
		ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{caddyhttp.ClientIPVarKey: ip})
		*r = *r.WithContext(ctx)
	}
}

func signInFrom(h *Handler, key, ip string) *http.Response {
	return serve(h, "POST", "/signin", url.Values{"key": {key}}, "", from(ip)).Result()
}

// TestSessionCapPerKey: one key signing in 10,100 times (as fast as the
// throttle lets it) keeps at most MaxSessionsPerKey sessions, its
// newest, and another key still signs in; before the cap the table
// filled at 10,000 and every sign-in answered 503 for the session TTL.
func TestSessionCapPerKey(t *testing.T) {
	// In one instant, in the store itself (no throttle): the table
	// never fills with one key's sessions.
	st := newSessions()
	for i := 0; i < MaxSessions+100; i++ {
		if _, _, err := st.create(roKey, DefaultSessionTTL); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if _, _, err := st.create(adminKey, DefaultSessionTTL); err != nil || len(st.m) != MaxSessionsPerKey+1 || len(st.byKey) != 2 {
		t.Fatalf("another key: %v, %d sessions, %d keys", err, len(st.m), len(st.byKey))
	}
	h, _, _ := newConsole(t)
	c := withClock(h)
	var ids []string
	for i := 0; i < MaxSessions+100; i++ {
		res := signInFrom(h, roKey, "192.0.2."+strconv.Itoa(1+i%200))
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in %d: %d", i, res.StatusCode)
		}
		ids = append(ids, res.Cookies()[0].Value)
		c.advance(SignInEveryPerKey)
	}
	h.sessions.mu.Lock()
	n := len(h.sessions.m)
	h.sessions.mu.Unlock()
	if n != MaxSessionsPerKey {
		t.Fatalf("%d sessions held, want %d", n, MaxSessionsPerKey)
	}
	for i, id := range ids {
		_, live := h.sessions.get(id)
		if want := i >= len(ids)-MaxSessionsPerKey; live != want {
			t.Fatalf("session %d of %d live %v", i, len(ids), live)
		}
	}
	if res := signInFrom(h, adminKey, "198.51.100.7"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("another key's sign-in: %d", res.StatusCode)
	}
	// The evicted session is signed out like any other.
	if w := serve(h, "GET", "/keys", nil, ids[0]); w.Code != http.StatusSeeOther {
		t.Fatalf("evicted session: %d", w.Code)
	}
}

// TestSignInThrottle: attempts are counted per client address (an IPv6
// /64) and per key, accepted or refused; past the burst an attempt is a
// 429 with Retry-After on the sign-in page, sets no cookie and takes
// nothing from the allowance; the allowance comes back with time.
func TestSignInThrottle(t *testing.T) {
	type attempt struct {
		key, ip string
		want    int
		retry   string // Retry-After of a 429
	}
	addrWait := strconv.Itoa(int(SignInEveryPerAddress / time.Second))
	keyWait := strconv.Itoa(int(SignInEveryPerKey / time.Second))
	wrong := func(i int) string { return "gw-wrong-" + strconv.Itoa(i) }
	var guesses []attempt
	for i := 0; i < SignInBurstPerAddress; i++ {
		guesses = append(guesses, attempt{wrong(i), "203.0.113.5", 401, ""})
	}
	var same []attempt
	for i := 0; i < SignInBurstPerKey; i++ {
		same = append(same, attempt{adminKey, "192.0.2." + strconv.Itoa(i+1), 303, ""})
	}
	var v6 []attempt
	for i := 0; i < SignInBurstPerAddress; i++ {
		v6 = append(v6, attempt{wrong(i), "2001:db8:1:2::" + strconv.FormatInt(int64(i+1), 16), 401, ""})
	}
	tests := []struct {
		name     string
		attempts []attempt
		// then, after the attempts
		then []attempt
		// after advancing the clock by wait, once more
		wait  time.Duration
		after attempt
	}{
		{"one address guessing keys", guesses,
			[]attempt{{wrong(99), "203.0.113.5", 429, addrWait}, {adminKey, "203.0.113.5", 429, addrWait}, {adminKey, "203.0.113.6", 303, ""}},
			SignInEveryPerAddress, attempt{adminKey, "203.0.113.5", 303, ""}},
		{"one key from many addresses, successes counted", same,
			[]attempt{{adminKey, "198.51.100.1", 429, keyWait}, {roKey, "198.51.100.1", 303, ""}},
			SignInEveryPerKey, attempt{adminKey, "198.51.100.2", 303, ""}},
		{"an IPv6 /64 is one address", v6,
			[]attempt{{wrong(99), "2001:db8:1:2:ffff::1", 429, addrWait}, {wrong(98), "2001:db8:1:3::1", 401, ""}},
			SignInEveryPerAddress, attempt{wrong(97), "2001:db8:1:2::abc", 401, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, _ := newConsole(t)
			c := withClock(h)
			check := func(i int, a attempt) {
				t.Helper()
				w := serve(h, "POST", "/signin", url.Values{"key": {a.key}}, "", from(a.ip))
				if w.Code != a.want {
					t.Fatalf("attempt %d (%s from %s): %d, want %d", i, a.key, a.ip, w.Code, a.want)
				}
				if got := w.Header().Get("Retry-After"); got != a.retry {
					t.Fatalf("attempt %d: Retry-After %q, want %q", i, got, a.retry)
				}
				if a.want == 429 {
					body := w.Body.String()
					if len(w.Result().Cookies()) != 0 || !strings.Contains(body, `id="signin"`) ||
						!strings.Contains(body, "too many sign-in attempts; try again in "+a.retry+" seconds") ||
						strings.Contains(body, a.key) || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
						t.Fatalf("429 page: cookies %v, %s", w.Result().Cookies(), body)
					}
				}
			}
			for i, a := range tt.attempts {
				check(i, a)
			}
			for i, a := range tt.then {
				check(len(tt.attempts)+i, a)
			}
			// Refused attempts took nothing: one interval frees one.
			c.advance(tt.wait)
			check(-1, tt.after)
		})
	}
}

// TestThrottleTableBound: the throttle's tables stay within their bound
// however many addresses and keys try, forgetting first what no longer
// counts.
func TestThrottleTableBound(t *testing.T) {
	s := newSessions()
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s.now = c.now
	for i := 0; i < maxThrottled+500; i++ {
		if _, ok := s.admitSignIn("a"+strconv.Itoa(i), "k"+strconv.Itoa(i)); !ok {
			t.Fatalf("attempt %d refused", i)
		}
	}
	if len(s.signins.addrs.m) > maxThrottled || len(s.signins.keys.m) > maxThrottled {
		t.Fatalf("tables %d and %d, bound %d", len(s.signins.addrs.m), len(s.signins.keys.m), maxThrottled)
	}
	// A name that is still throttled survives a sweep of forgotten ones.
	for range SignInBurstPerAddress {
		s.admitSignIn("busy", "")
	}
	c.advance(time.Hour)
	s.signins.addrs.m["busy"] = c.t.Add(time.Duration(SignInBurstPerAddress) * SignInEveryPerAddress)
	// One name short of the bound: the sweep that makes room finds the
	// first table's names idle, and nothing arbitrary is dropped.
	for i := 0; i < maxThrottled-1; i++ {
		s.admitSignIn("b"+strconv.Itoa(i), "")
	}
	if _, ok := s.admitSignIn("busy", ""); ok {
		t.Fatal("a throttled address was forgotten while others held nothing")
	}
}
