--[[
  fixed-window: at most `limit` units per aligned window floor(now / window).
  KEY    state hash { w = window id, n = units counted in that window }
  check(key, cost, limit, window, burst, now) -> { allowed, remaining, reset ms, retry ms, delay, window id, new count, new window?,
    more = ms until more quota: the window's end once anything is counted in it, else 0 }
  commit writes the new count and expires the hash at the window's end; refund gives units back in the same window
  (a negative cost, a penalty, charges them, whatever the count).
]]
ALG[1] = {
  check = function(key, cost, limit, window, burst, now)
    local id = math.floor(now / window)
    local st = redis.call('HMGET', key, 'w', 'n')
    local n = 0
    local fresh = tonumber(st[1]) ~= id
    if not fresh then n = tonumber(st[2]) end
    local ends = (id + 1) * window - now
    if n + cost <= limit then
      local reset = 0
      if n + cost > 0 then reset = ends end
      return { true, limit - n - cost, reset, 0, 0, id, n + cost, fresh, more = reset }
    end
    local reset = 0
    if n > 0 then reset = ends end
    return { false, limit - n, reset, ends, 0, more = reset }
  end,
  commit = function(key, r)
    if r[7] == 0 then return end
    redis.call('HSET', key, 'w', r[6], 'n', r[7])
    -- The hash lives until its window ends: set once per window, not on every hit.
    if r[8] then redis.call('PEXPIRE', key, r[3]) end
  end,
  refund = function(key, cost, limit, window, burst, now)
    local id = math.floor(now / window)
    local st = redis.call('HMGET', key, 'w', 'n')
    local n = 0
    if tonumber(st[1]) == id then n = tonumber(st[2]) elseif cost >= 0 then return end
    -- A negative cost is a penalty: it may open the window's count, which then lives until the window ends.
    redis.call('HSET', key, 'w', id, 'n', math.max(n - cost, 0))
    if n == 0 then redis.call('PEXPIRE', key, (id + 1) * window - now) end
  end,
}
