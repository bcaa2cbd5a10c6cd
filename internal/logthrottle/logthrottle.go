// Package logthrottle lets a repeated log line through once per interval
// and counts the ones it held back, so a store that stays away (Redis,
// the ledger's database) is reported every few seconds with a count, not
// on every request or every poll tick.
package logthrottle

import (
	"sync/atomic"
	"time"
)

// Throttle lets one event through per interval. Its zero value lets the
// first event through. It is safe for concurrent use and allocates
// nothing.
type Throttle struct {
	next       atomic.Int64
	suppressed atomic.Int64
}

// Allow reports whether an event at now may be logged, and how many were
// held back since the last one that was.
func (t *Throttle) Allow(now time.Time, every time.Duration) (bool, int64) {
	n := t.next.Load()
	if now.UnixNano() < n || !t.next.CompareAndSwap(n, now.Add(every).UnixNano()) {
		t.suppressed.Add(1)
		return false, 0
	}
	return true, t.suppressed.Swap(0)
}

// Reset lets the next event through at once (the condition it reports
// ended, so its next start is news).
func (t *Throttle) Reset() {
	t.next.Store(0)
	t.suppressed.Store(0)
}
