package routing

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff returns the wait before retry n (0 for the first retry): a
// uniform draw from [0, min(BackoffCap, BackoffBase·2^n)). With the
// defaults the bound runs 250ms, 500ms, 1s, 2s, 4s, then stays at 8s.
func (rt *Router) Backoff(n int) time.Duration {
	bound := rt.BackoffCap
	if n < 32 {
		if d := rt.BackoffBase << n; d > 0 && d < bound {
			bound = d
		}
	}
	return time.Duration(rt.Float() * float64(bound))
}

// maxRetryAfter bounds a parsed Retry-After so arithmetic on it cannot
// overflow; anything this long exceeds every budget anyway.
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads how long a failed response asks the client to
// wait, from the first present of retry-after-ms and x-ms-retry-after-ms
// (milliseconds) and retry-after (seconds, or an HTTP date relative to
// now). Unparseable or negative values are ignored.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	for _, name := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			ms, err := strconv.ParseFloat(v, 64)
			if err != nil || ms < 0 {
				continue
			}
			return clampWait(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return clampWait(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter), true
	}
	return 0, false
}

// clampWait converts nanoseconds to a Duration no longer than
// maxRetryAfter, before the conversion can overflow.
func clampWait(ns float64) time.Duration {
	if ns >= float64(maxRetryAfter) {
		return maxRetryAfter
	}
	return time.Duration(ns)
}

// SleepContext waits d, or until ctx is done, whichever is first; it
// returns ctx's error in the second case.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
