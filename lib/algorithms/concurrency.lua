--[[
  concurrency: live leases. Each lease is a sorted-set member "<token>:<i>" (one per unit of cost, i = 1..cost)
  scored by its expiry; a lease whose holder died expires after `window`. Allowed iff live leases + cost <= limit.
  A negative cost renews the lease named by token (its -cost members): allowed iff it is still live, and the
  commit moves its expiry to now + window (never earlier: ZADD XX of members that exist, so nothing is re-created).
  Refund releases the lease named by token: its members from ":1" up to the first missing one, so a cost above
  what is held costs nothing (no loop per unit of cost).

  Fragment of algorithm id 7 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units; negative: a renewal), limit (leases), window
  (a lease's life, ms), now (server ms), token (the lease id).
  KEY    state sorted set { "<token>:<i>" -> expiry ms }
  check  more = ms until the lease whose expiry raises remaining expires (the soonest, or the (n − limit + 1)-th
         soonest when more than the limit are live); 0 when none
  A renewal's `more` is measured by its commit, once the lease has moved.
]]
local function liveLeases(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return redis.call('ZCARD', key)
end

local function latestExpiry(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then return tonumber(last[2]) end
  return nil
end

-- Ms until remaining grows as n live leases stand: the expiry that takes them below the limit, or 0.
local function leaseMore(key, n, limit, now)
  if n == 0 then return 0 end
  local rank = math.max(n - limit, 0)
  return tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2]) - now
end

-- Whether the lease named by token is live (its first member is; all its members share one expiry), as a
-- check's ok, remaining, reset, retry, delay and more.
local function renewCheck(key, n, latest, limit, window, now, token)
  if redis.call('ZSCORE', key, token .. ':1') then
    local reset = window
    if latest - now > reset then reset = latest - now end
    return true, limit - n, reset, 0, 0, leaseMore(key, n, limit, now)
  end
  local reset = 0
  if latest then reset = latest - now end
  return false, math.max(limit - n, 0), reset, 0, 0, leaseMore(key, n, limit, now)
end

local function renew(key, units, expiry, token)
  for i = 1, units do
    local member = token .. ':' .. i
    local score = redis.call('ZSCORE', key, member)
    if not score then break end
    if tonumber(score) < expiry then redis.call('ZADD', key, 'XX', expiry, member) end
  end
end
--@check
local n = liveLeases(key, now)
local latest = latestExpiry(key)
if cost < 0 then
  ok, remaining, reset, retry, delay, more = renewCheck(key, n, latest, limit, window, now, token)
elseif n + cost <= limit then
  ok, remaining, reset, retry, delay = true, limit - n - cost, 0, 0, 0
  if cost > 0 then reset = window end
  if latest and latest - now > reset then reset = latest - now end
  -- The soonest expiry once this request's leases (expiring at now + window) are added.
  more = leaseMore(key, n, limit, now)
  if cost > 0 and (n == 0 or more > window) then more = window end
else
  ok, remaining, reset, retry, delay = false, math.max(limit - n, 0), 0, 0, 0
  if latest then reset = latest - now end
  local need = n + cost - limit
  if need <= n then retry = tonumber(redis.call('ZRANGE', key, need - 1, need - 1, 'WITHSCORES')[2]) - now end
  more = leaseMore(key, n, limit, now)
end
--@commit
if cost < 0 then
  renew(key, -cost, now + window, token)
  more = leaseMore(key, redis.call('ZCARD', key), limit, now)
  redis.call('PEXPIRE', key, reset)
elseif cost > 0 then
  for i = 1, cost do redis.call('ZADD', key, now + window, token .. ':' .. i) end
  redis.call('PEXPIRE', key, reset)
end
--@refund
for i = 1, cost do
  if redis.call('ZREM', key, token .. ':' .. i) == 0 then break end
end
