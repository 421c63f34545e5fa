--[[
  token-bucket: starts full with `burst` tokens, refills continuously at limit / window; a request takes `cost`.
  Tokens are kept scaled by the window, so refill keeps every fraction (see bucket.lua).

  Fragment of algorithm id 4 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units), limit (units refilled per window), window
  (ms), burst (units: the capacity), now (server ms). Uses state.lua and bucket.lua.
  KEY    state string "<tokens × k (scaled; below 0 after an overdraft)>:<last refill, ms>:<k = the window the
         tokens are scaled by>" (state.lua)
  check  bucket.lua's values; s1 = the debt after, s2 = the time it refilled up to (ms)
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

--@check
local debt, at = tokenBucketDebt(key, limit, window, burst, now)
ok, remaining, reset, retry, delay, more, s1 = bucket(debt, cost, limit, window, burst)
s2 = at
--@commit
tokenBucketStore(key, s1, s2, limit, window, burst)
--@refund
local debt, at = tokenBucketDebt(key, limit, window, burst, now)
tokenBucketStore(key, math.max(debt - cost * window, 0), at, limit, window, burst)
