package policies

import (
	"context"
	"errors"
	"time"
)

// DefaultBuckets is how many buckets a window is split into. More buckets
// return spent units closer to exactly one window later, at the price of
// memory per key (at most DefaultBuckets+2 buckets); 60 gives whole seconds
// for rpm and whole minutes for rph.
const DefaultBuckets = 60

// Decision is the outcome of Limiter.Admit. It carries what the HTTP layer
// needs for x-ratelimit-* headers and for Retry-After on a 429.
type Decision struct {
	// Allowed reports whether the cost was admitted (and consumed).
	Allowed bool
	// Limit is the limit the decision was made against.
	Limit int64
	// Remaining is how many units would still be admitted now, after this
	// decision; 0 when the key is at or over its limit.
	Remaining int64
	// ResetAfter is how long until the key's count is back to zero, that
	// is until the whole limit is available again; 0 when it already is.
	ResetAfter time.Duration
	// RetryAfter, when Allowed is false, is how long until the refused cost
	// would fit. A cost above the limit never fits: RetryAfter is then the
	// window, so a client that retries blindly is slowed down, not spun.
	RetryAfter time.Duration
}

// Limiter counts units per key against a limit per sliding window (see the
// package documentation for the algorithm and its guarantee). Limit and
// window are passed on every call rather than stored, so a policy edited in
// place retunes its existing counters. Errors are only returned for invalid
// arguments and for the backing store being unreachable; whether to fail
// open or closed on them is the caller's decision.
type Limiter interface {
	// Admit consumes cost units of key's budget (limit per window) if they
	// fit, atomically. A cost of 0 consumes nothing and reports whether at
	// least one unit would fit, for checks before the cost is known.
	Admit(ctx context.Context, key string, limit int64, window time.Duration, cost int64) (Decision, error)
	// Adjust charges (delta>0) or refunds (delta<0) units to key after the
	// fact, e.g. settling a token reservation against the provider's
	// reported usage. A charge may push the key over its limit (an answer
	// that overshoots is charged in full); later admissions then wait
	// longer. A refund cancels the oldest units still in the window and
	// never takes the count below zero; use SettleDelta to compute delta.
	Adjust(ctx context.Context, key string, limit int64, window time.Duration, delta int64) error
}

// LimiterOption configures NewMemoryLimiter and NewRedisLimiter. Each
// option says which limiter it applies to; the other one ignores it.
type LimiterOption func(*limiterConfig)

type limiterConfig struct {
	now        func() time.Time
	buckets    int64
	sweepEvery uint64
	prefix     string
}

func newLimiterConfig(opts []LimiterOption) limiterConfig {
	cfg := limiterConfig{now: time.Now, buckets: DefaultBuckets, sweepEvery: 256, prefix: DefaultKeyPrefix}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// WithClock replaces time.Now in a MemoryLimiter, for tests that step time
// by hand. A RedisLimiter ignores it: it always uses the Redis server's
// clock, so that instances with skewed clocks agree.
func WithClock(now func() time.Time) LimiterOption {
	return func(c *limiterConfig) {
		if now != nil {
			c.now = now
		}
	}
}

// WithBuckets sets how many buckets a window is split into (default
// DefaultBuckets), for both limiters; see the package documentation for
// the trade-off. Instances sharing Redis counters should agree on it; if
// they do not, the counters are re-bucketed (conservatively) on each call.
func WithBuckets(n int) LimiterOption {
	return func(c *limiterConfig) {
		if n > 0 {
			c.buckets = int64(n)
		}
	}
}

// WithSweepEvery sets after how many calls on one shard of a MemoryLimiter
// the next shard is swept for idle keys (default 256). Smaller values free
// idle keys sooner at more CPU cost.
func WithSweepEvery(n int) LimiterOption {
	return func(c *limiterConfig) {
		if n > 0 {
			c.sweepEvery = uint64(n)
		}
	}
}

// WithKeyPrefix sets the prefix of a RedisLimiter's keys (default
// DefaultKeyPrefix), to share one Redis between gateways or tests.
func WithKeyPrefix(p string) LimiterOption {
	return func(c *limiterConfig) { c.prefix = p }
}

// ErrInvalidArgument is returned (wrapped) by limiters for a limit below 1,
// a window shorter than a millisecond, a negative cost or an empty key.
var ErrInvalidArgument = errors.New("policies: invalid limiter argument")

// checkArgs validates the arguments shared by Admit and Adjust.
func checkArgs(key string, limit int64, window time.Duration) error {
	if key == "" {
		return errors.Join(ErrInvalidArgument, errors.New("empty key"))
	}
	if limit < 1 {
		return errors.Join(ErrInvalidArgument, errors.New("limit must be at least 1"))
	}
	if window < time.Millisecond {
		return errors.Join(ErrInvalidArgument, errors.New("window must be at least 1ms"))
	}
	return nil
}

// errNegativeCost is returned by Admit for cost < 0; refunds go through
// Adjust, where they are bounded by what was charged.
var errNegativeCost = errors.Join(ErrInvalidArgument, errors.New("cost must not be negative"))

// SettleDelta returns the Adjust delta that settles a reservation made by
// Admit at admittedAt against the units actually used. Usage above the
// reservation is always charged. Unused reservation is refunded only while
// the reservation is still inside its window: after that its units have
// already left the count, and refunding them would cancel newer units that
// really were spent, letting a later window exceed the limit.
func SettleDelta(reserved, used int64, admittedAt, now time.Time, window time.Duration) int64 {
	if used >= reserved {
		return used - reserved
	}
	if now.Sub(admittedAt) >= window {
		return 0
	}
	return used - reserved
}

// bucketWidth is the width of one bucket of window, in the window's own
// time unit, never below one unit.
func bucketWidth(window, buckets int64) int64 {
	if buckets < 1 {
		buckets = DefaultBuckets
	}
	w := window / buckets
	if w < 1 {
		w = 1
	}
	return w
}

// floorDiv divides rounding towards negative infinity, so that bucket
// indexes stay ordered across zero (test clocks start at arbitrary times).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// satAdd adds non-negative b to a without overflowing, so a runaway charge
// saturates instead of wrapping to a negative count.
func satAdd(a, b int64) int64 {
	const maxInt64 = 1<<63 - 1
	if a > maxInt64-b {
		return maxInt64
	}
	return a + b
}
