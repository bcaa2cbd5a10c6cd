// Package policies is the Caddy-independent core of the gateway's rate-limit
// policies: the policy record and its validation, matching a request against
// a policy's conditions, the counter key of a policy's group_by tuple, the
// limiting algorithm (in process and in Redis) and the stores that keep the
// policy records.
//
// # Algorithm: a sliding window counted in sub-window buckets
//
// A policy says "at most L units (requests or tokens) per window W". A fixed
// window (INCR a counter named after the current minute) lets a client spend
// L just before a boundary and L again just after it: 2L in a moment. GCRA /
// token bucket with burst L has no boundary, but it refills continuously
// while it is being spent, so a client that spends L at once and then keeps
// pace with the refill gets close to 2L inside one window too (L at t=0 and
// then one unit every W/L until t=W). For a "tokens per day" budget that is
// a surprise nobody wants, so this package uses a sliding window instead.
//
// Each key's window is split into N buckets (DefaultBuckets, 60: one second
// for rpm, one minute for rph, 24 minutes for rpd). Bucket i holds the units
// spent in [i·g, (i+1)·g) where g = W/N. At time t a bucket is live while
// its end is after t−W, that is while any part of it overlaps [t−W, t]; all
// live buckets are counted in full. Because a partly expired bucket counts
// in full, the count is never below the units spent in [t−W, t]: the error
// is one-sided. Admit(cost) succeeds only if count+cost ≤ L. Memory per key
// is at most N+2 buckets, whatever the traffic (an exact log of timestamps
// would grow with the request rate).
//
// # Guarantee
//
// Let L be the limit, W the window and N the number of buckets.
//
//   - Never more than L: an Admit that returns Allowed never brings the
//     units counted in any closed interval [t, t+W] above L, wherever t
//     falls. There is no boundary at which a second burst opens: L units
//     spent just before "the minute" leave no room just after it. (GCRA
//     with burst L, by contrast, admits up to 2L in some interval of
//     length W.) Proof: at time s every unit spent in [s−W, s] lies in a
//     live bucket, so the count an admission is checked against includes
//     them all.
//   - Never much less than L: Admit refuses only what an exact sliding
//     window of length W+W/N would refuse too. A spent unit returns to the
//     budget between W and W+W/N after it was spent, never earlier (at most
//     1.7% of the window late with N=60).
//   - Charges are not refused: Adjust with a positive delta counts like an
//     admission but may push an interval above L (a streamed answer that
//     used more tokens than were reserved is charged in full); admissions
//     are then refused until enough units have left the window.
//   - Refunds never open a hole: Adjust with a negative delta cancels the
//     oldest units still in the window. Those are never later than the
//     reservation being settled, so, provided the refund is made while its
//     reservation is still in the window (SettleDelta ensures it), every
//     later window is counted at least as high as with an exact refund.
//
// The first two properties are checked against an exact log of random
// traffic, for both limiters, in the tests.
//
// Decision fields: Remaining is L minus the current count (what one more
// Admit could take now); ResetAfter is when the count falls to zero;
// RetryAfter is when the count will have fallen enough for the refused cost
// to fit. A cost larger than L can never fit: it is refused with RetryAfter
// equal to the window.
//
// Limits and windows are passed on every call, not stored, so editing a
// policy retunes its counters in place: a raised limit admits more at once
// and a lowered one refuses until usage has decayed below it. A changed
// window (rpm to rph) re-buckets the existing units at the latest instant
// they could have happened, which keeps the guarantee.
//
// # Leased reservations
//
// The rate limiter's reservations need nothing more: a request that never
// settles (its instance was killed) leaves the count with the window. A
// usage limit's window is a month or forever, so its reservations are made
// through LeaseLimiter.Reserve, which also records them under an id with an
// expiry (lease.go). The next Reserve or Settle on the key gives back the
// expired ones first, and Settle removes its own reservation in the same
// atomic step as the charge, so a reservation is given back once, by its
// settlement or by its expiry, never both.
//
// # Stores
//
// Policy records live in Caddy's configured storage (StorageStore), in a
// Redis hash (RedisStore) or in memory (MemoryStore, for tests and
// Caddyfile-declared policies). Every store keeps the active policy set in
// an in-process cache (Active) so that admission never waits for storage
// I/O on each request.
package policies
