--[[
  leaky-bucket: a queue of up to `burst` units that drains at limit / window. An admitted request waits for
  the queue ahead of it to drain: delay = level / rate (nginx limit_req without nodelay).

  Fragment ALG[6] (the fragment contract is in decide.lua's header): no KEYS or ARGV of its own; its host passes
  the policy's state key and its values: cost (units), limit (units drained per window), window (ms), burst
  (units: the queue's capacity), now (server ms). Uses state.lua and bucket.lua.
  KEY    state string "<level × k (scaled)>:<last leak, ms>:<k = the window the level is scaled by>" (state.lua)
  check -> bucket.lua's reply with slot 5 the delay (ms) when allowed, then slot 7 = the time it leaked up to (ms)
]]
local function leakyLevel(key, limit, window, now)
  local v = redis.call('GET', key)
  if not v then return 0, now end
  local level, last, k = string.match(v, '^(%d+):(%d+):(%d+)$')
  if not level then foreignValue(key, v) end
  level, last, k = tonumber(level), tonumber(last), tonumber(k)
  if k ~= window then level = ceildiv(level * window, k) end
  if now > last then level = level - (now - last) * limit else now = last end
  if level < 0 then level = 0 end
  return level, now
end

local function leakyStore(key, level, at, limit, window)
  if level == 0 then redis.call('DEL', key) return end
  redis.call('SET', key, string.format('%d:%d:%d', level, at, window), 'PX', ceildiv(level, limit))
end

ALG[6] = {
  burst = true,
  check = function(key, cost, limit, window, burst, now)
    local level, at = leakyLevel(key, limit, window, now)
    local r = bucket(level, cost, limit, window, burst)
    if r[1] then r[5] = ceildiv(level, limit) end
    r[7] = at
    return r
  end,
  commit = function(key, r, now, cost, limit, window)
    leakyStore(key, r[6], r[7], limit, window)
  end,
  refund = function(key, cost, limit, window, burst, now)
    local level, at = leakyLevel(key, limit, window, now)
    leakyStore(key, math.max(level - cost * window, 0), at, limit, window)
  end,
}
