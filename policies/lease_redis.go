package policies

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// leaseField names a reservation's field in a RedisLimiter hash. The
// letter keeps it apart from the numeric bucket fields (luaPrelude reads
// any field that is not a number as a lease).
func leaseField(id string) string { return "l" + id }

// luaReclaim gives back the key's expired reservations: it returns what
// it gave back and what the unexpired ones hold. A lease's value is
// "units:expiry" in microseconds of the script's clock.
const luaReclaim = `
local function reclaim()
  local back, held, gone = 0, 0, {}
  for f, v in pairs(leases) do
    local sep = string.find(v, ':', 1, true)
    local n = tonumber(string.sub(v, 1, sep - 1))
    if tonumber(string.sub(v, sep + 1)) <= now then
      back = back + n
      gone[#gone + 1] = f
    else
      held = held + n
    end
  end
  for _, f in ipairs(gone) do leases[f] = nil end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  if back > 0 then refund(back) end
  return back, held
end
`

// reserveScript returns {allowed, remaining, reset_after_us,
// retry_after_us, reserved, held, reclaimed}. ARGV[6] is the lease field
// ("" holds nothing), ARGV[7] the lease in microseconds.
var reserveScript = redis.NewScript(luaPrelude + luaReclaim + `
local back, held = reclaim()
local allowed, retry, got = 0, 0, 0
if amount > limit then
  retry = window
elseif total <= limit - amount and (amount > 0 or total < limit) then
  allowed, got = 1, amount
elseif amount > 0 and total < limit then
  allowed, got = 1, limit - total
else
  retry = retryFor(amount)
end
if got > 0 then
  add(got)
  if ARGV[6] ~= '' then
    redis.call('HSET', key, ARGV[6], fmt(got) .. ':' .. fmt(now + tonumber(ARGV[7])))
    held = held + got
  end
end
local reset = finish()
local remaining = limit - total
if remaining < 0 then remaining = 0 end
return {allowed, remaining, reset, retry, got, held, back}
`)

// settleScript returns 1 when ARGV[6]'s reservation was still held
// (settled against it) and 0 when it was not (amount charged in full).
// ARGV[7] is "1" when an unused reservation may be refunded.
var settleScript = redis.NewScript(luaPrelude + luaReclaim + `
reclaim()
local v = leases[ARGV[6]]
local live, delta = 0, amount
if v ~= nil then
  live = 1
  redis.call('HDEL', key, ARGV[6])
  delta = amount - tonumber(string.sub(v, 1, string.find(v, ':', 1, true) - 1))
  if delta < 0 and ARGV[7] ~= '1' then delta = 0 end
end
if delta > 0 then add(delta) elseif delta < 0 then refund(-delta) end
finish()
return live
`)

var _ LeaseLimiter = (*RedisLimiter)(nil)

// Reserve implements LeaseLimiter in one script: reclaiming, admitting
// and holding are atomic against every instance.
func (r *RedisLimiter) Reserve(ctx context.Context, key string, limit int64, window time.Duration, cost int64, id string, lease time.Duration) (Reservation, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return Reservation{}, err
	}
	if cost < 0 {
		return Reservation{}, errNegativeCost
	}
	field := ""
	if id != "" {
		field = leaseField(id)
	}
	args := append(r.args(limit, window, cost), field, lease.Microseconds())
	res, err := reserveScript.Run(ctx, r.client, []string{r.prefix + key}, args...).Int64Slice()
	if err != nil {
		return Reservation{}, fmt.Errorf("policies: redis reserve: %w", err)
	}
	if len(res) != 7 {
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
		Reserved: res[4], Held: res[5], Reclaimed: res[6],
	}, nil
}

// Settle implements LeaseLimiter in one script, so a settlement and the
// expiry of the same reservation cannot both give it back.
func (r *RedisLimiter) Settle(ctx context.Context, key string, limit int64, window time.Duration, id string, used int64, refundable bool) (bool, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return false, err
	}
	flag := "0"
	if refundable {
		flag = "1"
	}
	args := append(r.args(limit, window, used), leaseField(id), flag)
	live, err := settleScript.Run(ctx, r.client, []string{r.prefix + key}, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("policies: redis settle: %w", err)
	}
	return live == 1, nil
}
