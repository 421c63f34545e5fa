--[[
  concurrency: live leases. Each lease is a sorted-set member "<token>:<i>" (one per unit of cost) scored by
  its expiry; a lease whose holder died expires after `window`. Allowed iff live leases + cost <= limit.
  KEY    state sorted set { "<token>:<i>" -> expiry ms }
  Refund releases the lease named by token. Reply: { allowed, remaining, reset ms, retry ms, 0 }
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

ALG[7] = {
  check = function(key, cost, limit, window, burst, now)
    local n = liveLeases(key, now)
    local latest = latestExpiry(key)
    if n + cost <= limit then
      local reset = 0
      if cost > 0 then reset = window end
      if latest and latest - now > reset then reset = latest - now end
      return { true, limit - n - cost, reset, 0, 0 }
    end
    local reset = 0
    if latest then reset = latest - now end
    local retry = 0
    local need = n + cost - limit
    if need <= n then retry = tonumber(redis.call('ZRANGE', key, need - 1, need - 1, 'WITHSCORES')[2]) - now end
    return { false, math.max(limit - n, 0), reset, retry, 0 }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    if cost == 0 then return end
    for i = 1, cost do redis.call('ZADD', key, now + window, token .. ':' .. i) end
    redis.call('PEXPIRE', key, r[3])
  end,
  refund = function(key, cost, limit, window, burst, now, token)
    for i = 1, cost do redis.call('ZREM', key, token .. ':' .. i) end
  end,
}
