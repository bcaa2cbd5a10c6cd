package policies

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyPrefix starts every RedisLimiter key unless WithKeyPrefix says
// otherwise.
const DefaultKeyPrefix = "llmgw:rl:"

// RedisLimiter is the Limiter shared by gateway instances through Redis.
// Each key is one Redis hash: field "w" is the bucket width in
// microseconds, every other field is a bucket index holding its units.
// Every Admit and every Adjust is one Lua script, so one round trip and
// atomic against all instances; the script reads the time with Redis TIME,
// so instances with skewed clocks still agree on the window, and gives the
// key a PEXPIRE of the time until its last unit leaves the window, so
// Redis holds nothing for idle keys. A script touches a single key, so it
// works unchanged on Redis Cluster.
//
// Errors from Redis are returned as they are: whether to fail open or
// closed is the caller's decision.
type RedisLimiter struct {
	client  redis.UniversalClient
	prefix  string
	buckets int64
	// now, when set (tests only), is sent to the scripts instead of using
	// Redis TIME, so that window arithmetic can be checked with a stepped
	// clock against the same tables as MemoryLimiter.
	now func() time.Time
}

// NewRedisLimiter returns a RedisLimiter on client. It uses WithKeyPrefix
// and WithBuckets.
func NewRedisLimiter(client redis.UniversalClient, opts ...LimiterOption) *RedisLimiter {
	cfg := newLimiterConfig(opts)
	return &RedisLimiter{client: client, prefix: cfg.prefix, buckets: cfg.buckets}
}

var _ Limiter = (*RedisLimiter)(nil)

// Admit implements Limiter.
func (r *RedisLimiter) Admit(ctx context.Context, key string, limit int64, window time.Duration, cost int64) (Decision, error) {
	if err := checkArgs(key, limit, window); err != nil {
		return Decision{}, err
	}
	if cost < 0 {
		return Decision{}, errNegativeCost
	}
	res, err := admitScript.Run(ctx, r.client, []string{r.prefix + key}, r.args(limit, window, cost)...).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("policies: redis admit: %w", err)
	}
	if len(res) != 4 {
		return Decision{}, fmt.Errorf("policies: redis admit: unexpected reply of %d values", len(res))
	}
	return Decision{
		Allowed:    res[0] == 1,
		Limit:      limit,
		Remaining:  res[1],
		ResetAfter: time.Duration(res[2]) * time.Microsecond,
		RetryAfter: time.Duration(res[3]) * time.Microsecond,
	}, nil
}

// Adjust implements Limiter.
func (r *RedisLimiter) Adjust(ctx context.Context, key string, limit int64, window time.Duration, delta int64) error {
	if err := checkArgs(key, limit, window); err != nil {
		return err
	}
	if delta == 0 {
		return nil
	}
	if err := adjustScript.Run(ctx, r.client, []string{r.prefix + key}, r.args(limit, window, delta)...).Err(); err != nil {
		return fmt.Errorf("policies: redis adjust: %w", err)
	}
	return nil
}

// args are the scripts' ARGV: limit, window and bucket width in
// microseconds, the amount, and the test clock (empty: use Redis TIME).
func (r *RedisLimiter) args(limit int64, window time.Duration, amount int64) []any {
	w := window.Microseconds()
	now := ""
	if r.now != nil {
		now = strconv.FormatInt(r.now().UnixMicro(), 10)
	}
	return []any{limit, w, bucketWidth(w, r.buckets), amount, now}
}

// luaPrelude loads the key's live buckets into `live` (index -> units),
// `order` (sorted indexes) and `total`, deleting expired buckets and
// re-bucketing units counted with another width at the end of their old
// bucket, exactly as counter.prepare does in memory.go. Numbers are
// microseconds; Lua's doubles hold them exactly (< 2^53).
const luaPrelude = `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local width = tonumber(ARGV[3])
local amount = tonumber(ARGV[4])
local now
if ARGV[5] ~= nil and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%d', n) end
local cur = math.floor(now / width)
local first = math.floor((now - window) / width)
local raw = redis.call('HGETALL', key)
local oldw = width
for i = 1, #raw, 2 do
  if raw[i] == 'w' then oldw = tonumber(raw[i + 1]) end
end
local rebuild = oldw ~= width
local live, order, stale = {}, {}, {}
local total = 0
for i = 1, #raw, 2 do
  local f = raw[i]
  if f ~= 'w' then
    local b, v = tonumber(f), tonumber(raw[i + 1])
    if rebuild then
      local e = (b + 1) * oldw
      if e > now - window then b = math.min(math.floor((e - 1) / width), cur) else b = nil end
    elseif b < first then
      b = nil
    end
    if b == nil or v <= 0 then
      stale[#stale + 1] = f
    else
      if live[b] == nil then live[b] = 0; order[#order + 1] = b end
      live[b] = live[b] + v
      total = total + v
    end
  end
end
if rebuild then
  redis.call('DEL', key)
  for b, v in pairs(live) do redis.call('HSET', key, fmt(b), fmt(v)) end
elseif #stale > 0 then
  redis.call('HDEL', key, unpack(stale))
end
table.sort(order)
-- add counts n units now; if the clock stepped back (a failover to a host
-- whose clock is behind) they join the newest bucket, as in counter.add.
local function add(n)
  local b = cur
  if #order > 0 and order[#order] > b then b = order[#order] end
  if live[b] == nil then live[b] = 0; order[#order + 1] = b end
  live[b] = live[b] + n
  total = total + n
  redis.call('HINCRBY', key, fmt(b), fmt(n))
end
-- refund cancels n units from the oldest buckets, never below zero.
local function refund(n)
  for _, b in ipairs(order) do
    if n <= 0 then break end
    local v = live[b]
    if v > n then
      live[b] = v - n
      total = total - n
      redis.call('HSET', key, fmt(b), fmt(v - n))
      n = 0
    elseif v > 0 then
      live[b] = 0
      total = total - v
      n = n - v
      redis.call('HDEL', key, fmt(b))
    end
  end
end
-- retryFor is how long until amount would fit (counter.admit's rule).
local function retryFor(amount)
  local need = total - limit + math.max(amount, 1)
  local freed = 0
  for _, b in ipairs(order) do
    freed = freed + live[b]
    if freed >= need then
      return (b + 1) * width + window - now
    end
  end
  return 0
end
local function finish()
  local newest = nil
  for b, v in pairs(live) do
    if v > 0 and (newest == nil or b > newest) then newest = b end
  end
  if newest == nil or total <= 0 then
    redis.call('DEL', key)
    return 0
  end
  redis.call('HSET', key, 'w', fmt(width))
  local reset = (newest + 1) * width + window - now
  redis.call('PEXPIRE', key, fmt(math.ceil(reset / 1000)))
  return reset
end
`

// admitScript returns {allowed, remaining, reset_after_us, retry_after_us}
// with the rules of counter.admit.
var admitScript = redis.NewScript(luaPrelude + `
local allowed, retry = 0, 0
if amount > limit then
  retry = window
elseif total <= limit - amount and (amount > 0 or total < limit) then
  allowed = 1
  if amount > 0 then add(amount) end
else
  retry = retryFor(amount)
end
local reset = finish()
local remaining = limit - total
if remaining < 0 then remaining = 0 end
return {allowed, remaining, reset, retry}
`)

// adjustScript charges a positive amount to the current bucket or refunds
// a negative one from the oldest buckets, never below zero.
var adjustScript = redis.NewScript(luaPrelude + `
if amount > 0 then
  add(amount)
elseif amount < 0 then
  refund(-amount)
end
finish()
return 1
`)
