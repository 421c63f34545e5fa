--[[
  gcra: generic cell rate algorithm. One theoretical arrival time (TAT) per key; a request of `cost` is
  allowed iff max(tat, now) + cost·T - burst·T <= now, T = window / limit.
  KEY    state hash { t = TAT, whole ms; r = the TAT's remainder in 1/limit ms }
  Measured in 1/limit ms the emission interval T is exactly `window`, so nothing is rounded (bucket.lua).
]]
local function gcraDebt(key, limit, now)
  local st = redis.call('HMGET', key, 't', 'r')
  if not st[1] then return 0 end
  local debt = (tonumber(st[1]) - now) * limit + tonumber(st[2])
  if debt < 0 then return 0 end
  return debt
end

local function gcraStore(key, debt, limit, now)
  if debt == 0 then redis.call('DEL', key) return end
  redis.call('HSET', key, 't', now + math.floor(debt / limit), 'r', debt % limit)
  redis.call('PEXPIRE', key, ceildiv(debt, limit))
end

ALG[5] = {
  burst = true,
  check = function(key, cost, limit, window, burst, now)
    return bucket(gcraDebt(key, limit, now), cost, limit, window, burst)
  end,
  commit = function(key, r, now, cost, limit)
    gcraStore(key, r[6], limit, now)
  end,
  refund = function(key, cost, limit, window, burst, now)
    gcraStore(key, math.max(gcraDebt(key, limit, now) - cost * window, 0), limit, now)
  end,
}
