--[[
  token-bucket: starts full with `burst` tokens, refills continuously at limit / window; a request takes `cost`.
  Tokens are kept scaled by the window, so refill keeps every fraction (see bucket.lua).

  Fragment ALG[4] (the fragment contract is in decide.lua's header): no KEYS or ARGV of its own; its host passes
  the policy's state key and its values: cost (units), limit (units refilled per window), window (ms), burst
  (units: the capacity), now (server ms). Uses state.lua and bucket.lua.
  KEY    state string "<tokens × k (scaled; below 0 after an overdraft)>:<last refill, ms>:<k = the window the
         tokens are scaled by>" (state.lua)
  check -> bucket.lua's reply, then slot 7 = the time it refilled up to (ms)
]]
local function tokenBucketDebt(key, limit, window, burst, now)
  local v = redis.call('GET', key)
  local capacity = burst * window
  if not v then return 0, now end
  local s, last, k = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not s then foreignValue(key, v) end
  s, last, k = tonumber(s), tonumber(last), tonumber(k)
  if k ~= window then s = math.floor(s * window / k) end
  if now > last then s = s + (now - last) * limit else now = last end
  if s > capacity then s = capacity end
  return capacity - s, now
end

-- Writes the bucket's debt (distance from full), refilled up to `at`; a full bucket needs no key.
local function tokenBucketStore(key, debt, at, limit, window, burst)
  if debt == 0 then redis.call('DEL', key) return end
  redis.call('SET', key, string.format('%d:%d:%d', burst * window - debt, at, window), 'PX', ceildiv(debt, limit))
end

ALG[4] = {
  burst = true,
  check = function(key, cost, limit, window, burst, now)
    local debt, at = tokenBucketDebt(key, limit, window, burst, now)
    local r = bucket(debt, cost, limit, window, burst)
    r[7] = at
    return r
  end,
  commit = function(key, r, now, cost, limit, window, burst)
    tokenBucketStore(key, r[6], r[7], limit, window, burst)
  end,
  refund = function(key, cost, limit, window, burst, now)
    local debt, at = tokenBucketDebt(key, limit, window, burst, now)
    tokenBucketStore(key, math.max(debt - cost * window, 0), at, limit, window, burst)
  end,
}
