package policies

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// In Redis a key's reservations live beside its counter hash, in two keys
// of the same Cluster hash slot (so one script may touch all three): a
// sorted set of "units:id" members scored by their expiry, and a string
// holding the sum of their units. Expired reservations are found with
// ZRANGEBYSCORE, so a call costs the same whatever the number of
// reservations in flight, and the counter hash keeps the shape older
// gateways read.

// luaLeases reads what the key's reservations hold (KEYS[2] the sorted
// set, KEYS[3] the sum) and gives back up to 1,000 expired ones per call
// (a later call takes the rest; unpack is bounded by Lua's C stack).
const luaLeases = `
local function reclaim()
  local back = 0
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', fmt(now), 'LIMIT', 0, 1000)
  if #gone > 0 then
    for _, m in ipairs(gone) do
      back = back + tonumber(string.sub(m, 1, string.find(m, ':', 1, true) - 1))
    end
    redis.call('ZREM', KEYS[2], unpack(gone))
    redis.call('DECRBY', KEYS[3], fmt(back))
    if back > 0 then refund(back) end
  end
  return back, tonumber(redis.call('GET', KEYS[3]) or '0')
end
-- keep gives the reservation keys the counter's lifetime, or drops them
-- with it: a reservation must outlive nothing it would give back to.
local function keep(reset)
  if reset <= 0 or redis.call('ZCARD', KEYS[2]) == 0 then
    redis.call('DEL', KEYS[2], KEYS[3])
  else
    local ms = fmt(math.ceil(reset / 1000))
    redis.call('PEXPIRE', KEYS[2], ms)
    redis.call('PEXPIRE', KEYS[3], ms)
  end
end
`

// reserveScript returns {allowed, remaining, reset_after_us,
// retry_after_us, reserved, held, reclaimed, used}. ARGV[6] is the reservation
// id ("" holds nothing), ARGV[7] the lease in microseconds, ARGV[8] "1"
// when the remainder of the limit may be reserved (Reserve) and "0" when
// only the whole cost may (Hold).
var reserveScript = redis.NewScript(luaPrelude + luaLeases + `
local back, held = reclaim()
local allowed, retry, got = 0, 0, 0
if amount > limit then
  retry = window
elseif total <= limit - amount and (amount > 0 or total < limit) then
  allowed, got = 1, amount
elseif ARGV[8] == '1' and amount > 0 and total < limit then
  allowed, got = 1, limit - total
else
  retry = retryFor(amount)
end
if got > 0 then
  add(got)
  if ARGV[6] ~= '' then
    redis.call('ZADD', KEYS[2], fmt(now + tonumber(ARGV[7])), fmt(got) .. ':' .. ARGV[6])
    redis.call('INCRBY', KEYS[3], fmt(got))
    held = held + got
  end
end
local reset = finish()
keep(reset)
local remaining = limit - total
if remaining < 0 then remaining = 0 end
return {allowed, remaining, reset, retry, got, held, back, total}
`)

// settleScript returns 1 when the reservation ARGV[6] of ARGV[7] units
// was still held (settled against it) and 0 when it was not (amount
// charged in full). ARGV[8] is "1" when an unused reservation may be
// refunded.
var settleScript = redis.NewScript(luaPrelude + luaLeases + `
reclaim()
local n = tonumber(ARGV[7])
local live, delta = 0, amount
if n > 0 and redis.call('ZREM', KEYS[2], fmt(n) .. ':' .. ARGV[6]) == 1 then
  live = 1
  redis.call('DECRBY', KEYS[3], fmt(n))
  delta = amount - n
  if delta < 0 and ARGV[8] ~= '1' then delta = 0 end
end
if delta > 0 then add(delta) elseif delta < 0 then refund(-delta) end
keep(finish())
return live
`)

var (
	_ LeaseLimiter = (*RedisLimiter)(nil)
	_ Holder       = (*RedisLimiter)(nil)
	_ Holder       = (*MemoryLimiter)(nil)
)

// leaseKeys are the full names of key's counter and of its reservations'
// sorted set and sum, the latter two tagged into the counter's slot. They
// start with the limiter's prefix (what an ACL key pattern or a fleet's
// clean-up matches), unless the prefix holds an unmatched brace that
// would move the tag.
func (r *RedisLimiter) leaseKeys(key string) []string {
	full := r.prefix + key
	slot := keySlot(full)
	tag := "{" + slotTag(slot) + "}"
	base := r.prefix + tag + key
	if keySlot(base) != slot {
		base = tag + full
	}
	return []string{full, base + "|leases", base + "|held"}
}

// Reserve implements LeaseLimiter in one script: reclaiming, admitting
// and holding are atomic against every instance.
func (r *RedisLimiter) Reserve(ctx context.Context, key string, limit int64, window time.Duration, cost int64, id string, lease time.Duration) (Reservation, error) {
	return r.reserve(ctx, key, limit, window, cost, id, lease, "1")
}

// Hold implements Holder with Reserve's script, the remainder refused.
func (r *RedisLimiter) Hold(ctx context.Context, key string, limit int64, window time.Duration, cost int64, id string, lease time.Duration) (Reservation, error) {
	return r.reserve(ctx, key, limit, window, cost, id, lease, "0")
}

func (r *RedisLimiter) reserve(ctx context.Context, key string, limit int64, window time.Duration, cost int64, id string, lease time.Duration, partial string) (Reservation, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return Reservation{}, err
	}
	if cost < 0 {
		return Reservation{}, errNegativeCost
	}
	args := append(r.args(limit, window, cost), id, lease.Microseconds(), partial)
	res, err := reserveScript.Run(ctx, r.client, r.leaseKeys(key), args...).Int64Slice()
	if err != nil {
		return Reservation{}, fmt.Errorf("policies: redis reserve: %w", err)
	}
	if len(res) != 8 {
		return Reservation{}, fmt.Errorf("policies: redis reserve: unexpected reply of %d values", len(res))
	}
	return Reservation{
		Decision: Decision{
			Allowed:    res[0] == 1,
			Limit:      limit,
			Remaining:  res[1],
			ResetAfter: time.Duration(res[2]) * time.Microsecond,
			RetryAfter: time.Duration(res[3]) * time.Microsecond,
		},
		Reserved: res[4], Held: res[5], Reclaimed: res[6], Used: res[7],
	}, nil
}

// Settle implements LeaseLimiter in one script, so a settlement and the
// expiry of the same reservation cannot both give it back.
func (r *RedisLimiter) Settle(ctx context.Context, key string, limit int64, window time.Duration, id string, reserved, used int64, refundable bool) (bool, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return false, err
	}
	flag := "0"
	if refundable {
		flag = "1"
	}
	args := append(r.args(limit, window, used), id, reserved, flag)
	live, err := settleScript.Run(ctx, r.client, r.leaseKeys(key), args...).Int64()
	if err != nil {
		return false, fmt.Errorf("policies: redis settle: %w", err)
	}
	return live == 1, nil
}

// keySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag (the text between the first "{" and the next "}", when not
// empty) or of the whole key, modulo 16384.
func keySlot(key string) uint16 {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						key = key[i+1 : j]
					}
					return crc16(key) & 16383
				}
			}
			break
		}
	}
	return crc16(key) & 16383
}

// crc16 is CRC-16/XMODEM, the checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slotTags holds, for every slot, a short hash tag that falls in it; a
// constant table, built on first use (a few milliseconds).
var slotTags = sync.OnceValue(func() *[16384]string {
	var t [16384]string
	for i, left := 0, len(t); left > 0; i++ {
		s := strconv.Itoa(i)
		if slot := crc16(s) & 16383; t[slot] == "" {
			t[slot] = s
			left--
		}
	}
	return &t
})

// slotTag returns a hash tag that maps to slot.
func slotTag(slot uint16) string { return slotTags()[slot] }
