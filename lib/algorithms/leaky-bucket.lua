--[[
  leaky-bucket: a queue of up to `burst` units that drains at limit / window. An admitted request waits for
  the queue ahead of it to drain: delay = level / rate (nginx limit_req without nodelay).

  Fragment of algorithm id 6 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units), limit (units drained per window), window
  (ms), burst (units: the queue's capacity), now (server ms). Uses state.lua and bucket.lua.
  KEY    state string "<level × k (scaled)>:<last leak, ms>:<k = the window the level is scaled by>" (state.lua)
  check  bucket.lua's values with the delay (ms) when allowed; s1 = the level after, s2 = the time it leaked up to (ms)
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

--@check
local level, at = leakyLevel(key, limit, window, now)
ok, remaining, reset, retry, delay, more, s1 = bucket(level, cost, limit, window, burst)
if ok then delay = ceildiv(level, limit) end
s2 = at
--@commit
leakyStore(key, s1, s2, limit, window)
--@refund
local level, at = leakyLevel(key, limit, window, now)
leakyStore(key, math.max(level - cost * window, 0), at, limit, window)
