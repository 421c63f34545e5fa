--[[
  token-bucket: starts full with `burst` tokens, refills continuously at limit / window; a request takes `cost`.
  KEY    state hash { s = tokens × k (scaled), t = last refill (ms), k = the window the tokens are scaled by }
  Tokens are kept scaled by the window, so refill keeps every fraction (see bucket.lua).
]]
local function tokenBucketDebt(key, limit, window, burst, now)
  local st = redis.call('HMGET', key, 's', 't', 'k')
  local capacity = burst * window
  if not st[1] then return 0, now end
  local s = tonumber(st[1])
  local k = tonumber(st[3])
  if k ~= window then s = math.floor(s * window / k) end
  local last = tonumber(st[2])
  if now > last then s = s + (now - last) * limit else now = last end
  if s > capacity then s = capacity end
  return capacity - s, now
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
    if r[6] == 0 then redis.call('DEL', key) return end
    redis.call('HSET', key, 's', burst * window - r[6], 't', r[7], 'k', window)
    redis.call('PEXPIRE', key, r[3])
  end,
  refund = function(key, cost, limit, window, burst, now)
    local debt, at = tokenBucketDebt(key, limit, window, burst, now)
    debt = math.max(debt - cost * window, 0)
    if debt == 0 then redis.call('DEL', key) return end
    redis.call('HSET', key, 's', burst * window - debt, 't', at, 'k', window)
    redis.call('PEXPIRE', key, ceildiv(debt, limit))
  end,
}
