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
// expiry (the lease) in the key's own state: a Redis hash field next to
// the buckets, or a map in the memory counter. Every Reserve and Settle
// on the key first gives back the reservations whose lease ran out, so
// the next instance touching the budget reclaims what a dead one held,
// with no scanner. Settle removes its own reservation atomically with the
// charge: a reservation settled before its lease ran out is settled
// exactly once, and one that was already given back by expiry is charged
// what was used, in full, never refunded twice.

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
	// Settle replaces id's reservation on key by used units: when the
	// reservation is still held it is removed and the difference charged
	// (or refunded, only if refundable: see SettleDelta) and live is true;
	// when it is not (its lease ran out and it was given back, or it
	// never existed) used is charged in full and live is false.
	Settle(ctx context.Context, key string, limit int64, window time.Duration, id string, used int64, refundable bool) (live bool, err error)
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
}

// lease is one reservation held in a memory counter.
type lease struct {
	n, exp int64
}

// reclaim refunds the counter's expired reservations at t and returns
// what it gave back and what the others still hold. The counter must
// have been prepared for t.
func (c *counter) reclaim(t int64) (back, held int64) {
	for id, l := range c.leases {
		if l.exp <= t {
			back += l.n
			delete(c.leases, id)
		} else {
			held += l.n
		}
	}
	if back > 0 {
		c.refund(back)
	}
	return back, held
}

// Reserve implements LeaseLimiter.
func (m *MemoryLimiter) Reserve(_ context.Context, key string, limit int64, window time.Duration, cost int64, id string, ttl time.Duration) (Reservation, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return Reservation{}, err
	}
	if cost < 0 {
		return Reservation{}, errNegativeCost
	}
	t, w := m.tick(), int64(window)
	s := m.shard(key)
	s.mu.Lock()
	c := s.m[key]
	if c == nil {
		if cost == 0 || cost > limit {
			s.mu.Unlock()
			return Reservation{Decision: emptyDecision(limit, w, cost)}, nil
		}
		c = s.insert(key)
	}
	c.prepare(t, w, bucketWidth(w, m.buckets))
	var r Reservation
	r.Reclaimed, r.Held = c.reclaim(t)
	got := cost
	if cost > 0 && cost <= limit && c.total < limit && c.total > limit-cost {
		got = limit - c.total
	}
	r.Decision = c.admit(t, limit, got)
	if r.Allowed {
		r.Reserved = got
		if got > 0 && id != "" {
			if c.leases == nil {
				c.leases = make(map[string]lease)
			}
			c.leases[id] = lease{n: got, exp: t + int64(ttl)}
			r.Held += got
		}
	}
	if c.total <= 0 {
		delete(s.m, key)
	}
	sweep := s.count(m.sweepEvery)
	s.mu.Unlock()
	if sweep {
		m.sweepOne()
	}
	return r, nil
}

// Settle implements LeaseLimiter.
func (m *MemoryLimiter) Settle(_ context.Context, key string, limit int64, window time.Duration, id string, used int64, refundable bool) (bool, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return false, err
	}
	t, w := m.tick(), int64(window)
	s := m.shard(key)
	s.mu.Lock()
	c := s.m[key]
	if c == nil {
		if used <= 0 {
			s.mu.Unlock()
			return false, nil
		}
		c = s.insert(key)
	}
	c.prepare(t, w, bucketWidth(w, m.buckets))
	c.reclaim(t)
	l, live := c.leases[id]
	delta := used
	if live {
		delete(c.leases, id)
		delta = used - l.n
		if delta < 0 && !refundable {
			delta = 0
		}
	}
	if delta > 0 {
		c.add(floorDiv(t, c.width), delta)
	} else if delta < 0 {
		c.refund(-delta)
	}
	if c.total <= 0 {
		delete(s.m, key)
	}
	sweep := s.count(m.sweepEvery)
	s.mu.Unlock()
	if sweep {
		m.sweepOne()
	}
	return live, nil
}
