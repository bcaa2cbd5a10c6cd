package console

import (
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Sign-in throttle. Every attempt counts, accepted or refused, against
// both the client's address and the key typed in: a burst is allowed at
// once, then one attempt per interval. An address guessing keys and a key
// signing in over and over (to fill the session table) are both slowed
// to a trickle, while a person signing in from a few browsers never
// notices.
const (
	// SignInBurstPerAddress attempts are allowed at once from one client
	// address (an IPv6 client's /64), then one per
	// SignInEveryPerAddress: 30 a minute, for an office behind one NAT.
	SignInBurstPerAddress = 30
	SignInEveryPerAddress = 2 * time.Second
	// SignInBurstPerKey attempts are allowed at once with one key, then
	// one per SignInEveryPerKey: 2 a minute.
	SignInBurstPerKey = 10
	SignInEveryPerKey = 30 * time.Second
	// maxThrottled bounds each table of the throttle (addresses, keys).
	maxThrottled = 10000
)

// signinThrottle holds one rate table per kind of name. Its methods are
// called with sessions.mu held.
type signinThrottle struct {
	addrs, keys rateTable
}

func newSigninThrottle() *signinThrottle {
	return &signinThrottle{
		addrs: rateTable{m: map[string]time.Time{}, burst: SignInBurstPerAddress, every: SignInEveryPerAddress},
		keys:  rateTable{m: map[string]time.Time{}, burst: SignInBurstPerKey, every: SignInEveryPerKey},
	}
}

// rateTable is a generic cell rate limiter per name: m holds each name's
// theoretical arrival time, the instant its allowance is whole again. A
// name whose instant has passed holds nothing and can be forgotten.
type rateTable struct {
	m     map[string]time.Time
	burst int
	every time.Duration
}

// next returns what name's instant becomes if one attempt is taken now,
// and how long the attempt must wait (0: it may go now).
func (t *rateTable) next(name string, now time.Time) (time.Time, time.Duration) {
	tat := t.m[name]
	if tat.Before(now) {
		tat = now
	}
	tat = tat.Add(t.every)
	wait := tat.Sub(now) - time.Duration(t.burst)*t.every
	return tat, max(wait, 0)
}

// set records name's instant, keeping the table within maxThrottled:
// when full, names holding nothing are forgotten, then, if none were, an
// arbitrary one (whose attempts are forgiven rather than everyone's
// refused).
func (t *rateTable) set(name string, tat, now time.Time) {
	if _, ok := t.m[name]; !ok && len(t.m) >= maxThrottled {
		for n, v := range t.m {
			if !v.After(now) {
				delete(t.m, n)
			}
		}
		for n := range t.m {
			if len(t.m) < maxThrottled {
				break
			}
			delete(t.m, n)
		}
	}
	t.m[name] = tat
}

// admitSignIn counts one sign-in attempt from addr with key ("" when none
// was typed) and reports whether it may proceed; when it may not, wait is
// how long until it may. A refused attempt takes nothing from either
// allowance.
func (s *sessions) admitSignIn(addr, key string) (wait time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, th := s.now(), s.signins
	atA, waitA := th.addrs.next(addr, now)
	var (
		kname string
		atK   time.Time
		waitK time.Duration
	)
	if key != "" {
		kid := keyIDOf(key)
		kname = string(kid[:])
		atK, waitK = th.keys.next(kname, now)
	}
	if wait = max(waitA, waitK); wait > 0 {
		return wait, false
	}
	th.addrs.set(addr, atA, now)
	if kname != "" {
		th.keys.set(kname, atK, now)
	}
	return 0, true
}

// clientAddress names the client of r for the throttle: Caddy's client IP
// (which honours the server's trusted_proxies), else the connection's
// address; an IPv6 address stands for its /64, which one client holds.
func clientAddress(r *http.Request) string {
	s, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if s == "" {
		s = r.RemoteAddr
		if h, _, err := net.SplitHostPort(s); err == nil {
			s = h
		}
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return s
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
