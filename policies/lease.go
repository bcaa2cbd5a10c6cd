package policies

import (
	"context"
	"time"
)

// Leased reservations. A usage limit (package budgets) reserves at
// admission and settles when the request ends; a request whose instance
// dies (SIGKILL, OOM, a lost node) never settles, and with a counter
// window of a month (or a century for a budget that never resets) its
// reservation would stay counted for the whole period. A reservation made
// through LeaseLimiter.Reserve is therefore recorded under an id with an
// expiry (the lease) beside the key's counter: in Redis a sorted set by
// expiry and a sum, in the same Cluster slot as the counter hash
// (lease_redis.go); in memory a map in the counter. Every Reserve and
// Settle on the key first gives back the reservations whose lease ran
// out, so the next instance touching the budget reclaims what a dead one
// held, with no scanner. Settle removes its own reservation atomically
// with the charge: a reservation settled before its lease ran out is
// settled exactly once, and one that was already given back by expiry is
// charged what was used, in full, never refunded twice.

// LeaseLimiter is a Limiter whose reservations expire. Both MemoryLimiter
// and RedisLimiter implement it.
type LeaseLimiter interface {
	Limiter
	// Reserve gives back the expired reservations on key, then admits
	// cost as Admit does, except that a cost that does not fit while some
	// of the limit remains reserves that remainder instead
	// (Reservation.Reserved < cost). What is reserved is held under id
	// until Settle or until lease has passed, whichever comes first. A
	// cost of 0 (or an empty id) holds nothing: it reclaims and reports.
	Reserve(ctx context.Context, key string, limit int64, window time.Duration, cost int64, id string, lease time.Duration) (Reservation, error)
	// Settle replaces id's reservation of reserved units (what Reserve
	// said) on key by used units: when the reservation is still held it
	// is removed and the difference charged (or refunded, only if
	// refundable: see SettleDelta) and live is true; when it is not (its
	// lease ran out and it was given back, or it never existed) used is
	// charged in full and live is false.
	Settle(ctx context.Context, key string, limit int64, window time.Duration, id string, reserved, used int64, refundable bool) (live bool, err error)
}

// Holder is a limiter whose reservations expire and are whole: Hold
// admits cost as Admit does (all of it or nothing, as a rate limit
// admits a request) and holds it under id until Settle or until lease
// has passed, like Reserve. A token or cost rate limit reserves its
// estimate this way, so what a dead instance reserved comes back after
// the lease instead of at the end of the window. Both MemoryLimiter and
// RedisLimiter implement it.
type Holder interface {
	Limiter
	Hold(ctx context.Context, key string, limit int64, window time.Duration, cost int64, id string, lease time.Duration) (Reservation, error)
	Settle(ctx context.Context, key string, limit int64, window time.Duration, id string, reserved, used int64, refundable bool) (live bool, err error)
}

// Reservation is the outcome of LeaseLimiter.Reserve.
type Reservation struct {
	Decision
	// Reserved is what was reserved and held: cost, the remainder of the
	// limit when cost did not fit, or 0 when refused.
	Reserved int64
	// Held is what the key's unexpired reservations hold, this one
	// included: requests in flight that will settle.
	Held int64
	// Reclaimed is what this call gave back from expired reservations.
	Reclaimed int64
	// Used is what the key counts in its window after this call,
	// reservations included: more than the limit when a settlement
	// charged past it (Decision.Remaining is then 0), so a report can
	// show what was spent, not the limit.
	Used int64
}

// lease is one reservation held in a memory counter.
type lease struct {
	n, exp int64
}

// leaseSet is a memory counter's reservations: by id, their sum, and the
// earliest expiry among them (or earlier: a settled reservation's), so
// that a call looks through them only when one may have expired.
type leaseSet struct {
	byID map[string]lease
	held int64
	next int64
}

// reclaim refunds the counter's expired reservations at t and returns
// what it gave back and what the others still hold. The counter must
// have been prepared for t.
func (c *counter) reclaim(t int64) (back, held int64) {
	ls := c.leases
	if ls == nil {
		return 0, 0
	}
	if t < ls.next {
		return 0, ls.held
	}
	ls.next = 1<<63 - 1
	for id, l := range ls.byID {
		if l.exp <= t {
			back += l.n
			delete(ls.byID, id)
		} else {
			ls.next = min(ls.next, l.exp)
		}
	}
	ls.held -= back
	if back > 0 {
		c.refund(back)
	}
	return back, ls.held
}

// hold records a reservation of n units under id until exp.
func (c *counter) hold(id string, n, exp int64) {
	if c.leases == nil {
		c.leases = &leaseSet{byID: make(map[string]lease), next: exp}
	}
	ls := c.leases
	if old, ok := ls.byID[id]; ok {
		ls.held -= old.n
	}
	ls.byID[id] = lease{n: n, exp: exp}
	ls.held += n
	ls.next = min(ls.next, exp)
}

// release removes id's reservation and reports its units, if held.
func (c *counter) release(id string) (int64, bool) {
	if c.leases == nil {
		return 0, false
	}
	l, ok := c.leases.byID[id]
	if ok {
		delete(c.leases.byID, id)
		c.leases.held -= l.n
	}
	return l.n, ok
}

// Reserve implements LeaseLimiter.
func (m *MemoryLimiter) Reserve(_ context.Context, key string, limit int64, window time.Duration, cost int64, id string, ttl time.Duration) (Reservation, error) {
	return m.reserve(key, limit, window, cost, id, ttl, true)
}

// Hold implements Holder.
func (m *MemoryLimiter) Hold(_ context.Context, key string, limit int64, window time.Duration, cost int64, id string, ttl time.Duration) (Reservation, error) {
	return m.reserve(key, limit, window, cost, id, ttl, false)
}

// reserve is Reserve (partial: the remainder of the limit is reserved
// when cost does not fit) and Hold (cost or nothing).
func (m *MemoryLimiter) reserve(key string, limit int64, window time.Duration, cost int64, id string, ttl time.Duration, partial bool) (Reservation, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return Reservation{}, err
	}
	if cost < 0 {
		return Reservation{}, errNegativeCost
	}
	var r Reservation
	ok := m.update(key, window, cost > 0 && cost <= limit, func(c *counter, t int64) {
		r.Reclaimed, r.Held = c.reclaim(t)
		got := cost
		if partial && cost > 0 && cost <= limit && c.total < limit && c.total > limit-cost {
			got = limit - c.total
		}
		r.Decision = c.admit(t, limit, got)
		if r.Allowed {
			r.Reserved = got
			if got > 0 && id != "" {
				c.hold(id, got, t+int64(ttl))
				r.Held += got
			}
		}
		r.Used = c.total
	})
	if !ok {
		return Reservation{Decision: emptyDecision(limit, int64(window), cost)}, nil
	}
	return r, nil
}

// Settle implements LeaseLimiter.
func (m *MemoryLimiter) Settle(_ context.Context, key string, limit int64, window time.Duration, id string, _, used int64, refundable bool) (bool, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return false, err
	}
	var live bool
	// A counter that is gone holds no reservation; only a charge makes one.
	m.update(key, window, used > 0, func(c *counter, t int64) {
		c.reclaim(t)
		var n int64
		n, live = c.release(id)
		delta := used
		if live {
			delta = used - n
			if delta < 0 && !refundable {
				delta = 0
			}
		}
		if delta > 0 {
			c.add(floorDiv(t, c.width), delta)
		} else if delta < 0 {
			c.refund(-delta)
		}
	})
	return live, nil
}
