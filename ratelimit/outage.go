package ratelimit

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/logthrottle"
)

// logEvery is the minimum interval between two failure log lines.
const logEvery = 10 * time.Second

// probeEvery is how long a failed limiter or store is assumed down before
// one request tries it again. Meanwhile requests get the fail mode (503 or
// admission) without waiting for Redis: a refused connection otherwise
// costs each request the Redis client's dial retries (about a second),
// and an unreachable host its dial timeout.
const probeEvery = time.Second

// state is what a handler's requests share about failures.
type state struct {
	// failLog lets limiter and store failures be logged at most once per
	// logEvery, with the count of those suppressed meanwhile, so a Redis
	// outage does not flood the log with one line per request.
	failLog logthrottle.Throttle
	// down and storeDown remember a failing limiter or store, so that
	// during an outage requests get the fail mode at once instead of each
	// waiting for the Redis client's dial retries. They are separate
	// because an unreadable storage must not switch off the in-process
	// limiter.
	down, storeDown outage
	// storeLoaded is set once the policy store answered: from then on it
	// serves its cached set even while its backend is down.
	storeLoaded atomic.Bool
}

// outage is a minimal circuit breaker for the limiter's backend: open for
// probeEvery after a failure, then half open for a single probing request.
type outage struct {
	// until is when the next probe may go, in Unix nanoseconds; 0 when the
	// backend is healthy.
	until atomic.Int64
}

// failFast reports whether a call to the backend should be skipped now.
// Once the open period is over exactly one caller gets false (the probe)
// and the period is extended for the others.
func (o *outage) failFast() bool {
	u := o.until.Load()
	if u == 0 {
		return false
	}
	now := time.Now().UnixNano()
	if now < u {
		return true
	}
	return !o.until.CompareAndSwap(u, now+int64(probeEvery))
}

// failed opens the breaker.
func (o *outage) failed() {
	o.until.Store(time.Now().Add(probeEvery).UnixNano())
}

// ok closes the breaker after a successful call.
func (o *outage) ok() {
	if o.until.Load() != 0 {
		o.until.Store(0)
	}
}

// logFailure logs a limiter or store failure, at most once per logEvery.
// err comes from the store or Redis client and never holds a gateway key.
func (h *Handler) logFailure(msg string, err error) {
	if h.logger == nil {
		return
	}
	ok, suppressed := h.st.failLog.Allow(time.Now(), logEvery)
	if !ok {
		return
	}
	h.logger.Error(msg,
		zap.Error(err),
		zap.Bool("fail_open", !h.ctl.FailClosed()),
		zap.Int64("suppressed_since_last", suppressed))
}
