--[[
  sliding-log: exact. One sorted-set entry per unit taken, scored by its time; allowed iff the entries in
  (now − W, now] plus cost fit the limit. Rejected requests are never logged.

  Fragment of algorithm id 3 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units), limit (units per window), window (W, ms),
  now (server ms), token (a settlement's charge time, ms, or '').
  KEY    state sorted set; member "<ms>:<n, 8 digits>", unique even for many entries in one millisecond
         (n continues the count of entries already at that millisecond), score = ms.
  check  more = ms until the entry whose ageing out raises remaining (the oldest, or the (n − limit + 1)-th
         oldest when the log holds more than the limit) leaves the window
]]
local function slidingLogTrim(key, window, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  return redis.call('ZCARD', key)
end

local function slidingLogScore(key, rank)
  return tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
end

-- Logs `cost` entries at now (the commit, and a penalty's refund).
local function slidingLogAdd(key, now, cost, window)
  local base = redis.call('ZCOUNT', key, now, now)
  local i = 1
  while i <= cost do -- in chunks: unpack() has a stack limit
    local args = {}
    for j = i, math.min(i + 499, cost) do
      args[#args + 1] = now
      args[#args + 1] = string.format('%d:%08d', now, base + j)
    end
    redis.call('ZADD', key, (table.unpack or unpack)(args)) -- unpack is Lua 5.1's (Redis, Valkey), table.unpack 5.4's (Dragonfly)
    i = i + 500
  end
  redis.call('PEXPIRE', key, window)
end
--@check
local n = slidingLogTrim(key, window, now)
if n + cost <= limit then
  ok, remaining, reset, retry, delay, more = true, limit - n - cost, 0, 0, 0, 0
  if cost > 0 then reset = window
  elseif n > 0 then reset = slidingLogScore(key, -1) + window - now end
  -- The oldest entry after this request (its own entries are at now) is the next to age out.
  if n > 0 then
    local oldest = slidingLogScore(key, 0)
    if cost > 0 and now < oldest then oldest = now end
    more = oldest + window - now
  elseif cost > 0 then more = window end
else
  local need = n + cost - limit
  ok, remaining, reset, retry, delay, more = false, math.max(limit - n, 0), 0, 0, 0, 0
  if need <= n then retry = slidingLogScore(key, need - 1) + window - now end
  if n > 0 then
    reset = slidingLogScore(key, -1) + window - now
    more = slidingLogScore(key, math.max(n - limit, 0)) + window - now
  end
end
--@commit
if cost ~= 0 then slidingLogAdd(key, now, cost, window) end
--@refund
-- A negative cost is a penalty (or an overdraft): log that many units now, as an admitted request would,
-- up to twice the limit (one entry per unit: penalties without end would be memory without end).
if cost < 0 then
  local add = math.min(-cost, math.max(2 * limit - slidingLogTrim(key, window, now), 0))
  if add > 0 then slidingLogAdd(key, now, add, window) end
  return
end
-- cost 0 gives nothing back (and -0 would reach Redis as the invalid rank '-0').
if cost <= 0 or slidingLogTrim(key, window, now) == 0 then return end
local at = tonumber(token)
if at then
  -- A settlement's token is when its units were logged: remove entries of that millisecond only (they
  -- hold the ranks just below the first later entry, highest members last), none once they aged out.
  local last = redis.call('ZCOUNT', key, '-inf', at) - 1
  local k = math.min(redis.call('ZCOUNT', key, at, at), cost)
  if k > 0 then redis.call('ZREMRANGEBYRANK', key, last - k + 1, last) end
  return
end
redis.call('ZREMRANGEBYRANK', key, -cost, -1)
