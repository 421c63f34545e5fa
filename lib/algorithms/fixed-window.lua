--[[
  fixed-window: at most `limit` units per aligned window floor(now / window).
  A calendar window arrives as `window` = { b0, b1, b2, b3 }, four consecutive period starts (ms) the app
  computed around its own clock; the window is the period holding the server's now ([b0,b1), [b1,b2) or
  [b2,b3)), its id the period's start. A now outside [b0, b3) fails the decision (clocks a period apart).

  Fragment ALG[1] (the fragment contract is in decide.lua's header): no KEYS or ARGV of its own; its host passes
  the policy's state key and its values: cost (units), limit (units per window), window (ms, or the four
  period starts), now (server ms), token (a settlement's charge time, ms, or ''). Uses state.lua.
  KEY    state string "<window id>:<units counted in that window>" (state.lua)
  check -> { allowed, remaining, reset ms, retry ms, delay (0), window id, new count, new window?,
    more = ms until more quota: the window's end once anything is counted in it, else 0 }
  commit writes a new window's count, expiring at the window's end, or the count of the window it holds with
  its expiry kept; refund gives units back in the same window (a negative cost, a penalty, charges them,
  whatever the count).
]]
local fixedWindowType = type

-- A calendar window's period holding now: its start (the window id) and its end, ms.
local function calendarPeriod(window, now)
  for i = 1, 3 do
    if now >= window[i] and now < window[i + 1] then return window[i], window[i + 1] end
  end
  -- %d: a whole number that cjson decoded as a float (Lua 5.4) still prints without an exponent.
  error({ err = string.format('calendar window: the store\'s clock (%d ms) is outside the periods computed on this host'
    .. ' (%d to %d ms): the clocks differ by more than a period.', now, window[1], window[4]) })
end

-- The units counted in window id, and whether the key holds another window (or nothing).
local function fixedWindowCount(key, id)
  local v = redis.call('GET', key)
  if not v then return 0, true end
  local w, n = string.match(v, '^(%d+):(%d+)$')
  if not w then foreignValue(key, v) end
  if tonumber(w) == id then return tonumber(n), false end
  return 0, true
end

-- The window holding now: its id, start and end (ms).
local function fixedWindowAt(window, now)
  if fixedWindowType(window) == 'number' then
    local id = math.floor(now / window)
    return id, id * window, (id + 1) * window
  end
  local start, stop = calendarPeriod(window, now)
  return start, start, stop
end

ALG[1] = {
  check = function(key, cost, limit, window, burst, now)
    -- fixedWindowAt, inlined on this path (every decision): the call would double what finding the window costs.
    local id, stop
    if fixedWindowType(window) == 'number' then
      id = math.floor(now / window)
      stop = (id + 1) * window
    else
      id, stop = calendarPeriod(window, now)
    end
    local n, fresh = fixedWindowCount(key, id)
    local ends = stop - now
    if n + cost <= limit then
      local reset = 0
      if n + cost > 0 then reset = ends end
      return { true, limit - n - cost, reset, 0, 0, id, n + cost, fresh, more = reset }
    end
    local reset = 0
    if n > 0 then reset = ends end
    return { false, limit - n, reset, ends, 0, more = reset }
  end,
  commit = function(key, r, now, cost)
    if r[7] == 0 then return end
    -- The key lives until its window ends: set once per window, kept on every later hit.
    if r[8] or cost ~= 0 then putState(key, string.format('%d:%d', r[6], r[7]), r[8] and r[3] or nil) end
  end,
  refund = function(key, cost, limit, window, burst, now, token)
    local id, start, stop = fixedWindowAt(window, now)
    -- A settlement's token is when its units were charged: units of an earlier window ended with it.
    local at = tonumber(token)
    if cost >= 0 and at and at < start then return end
    local n, other = fixedWindowCount(key, id)
    if other and cost >= 0 then return end
    -- A negative cost is a penalty: it may open the window's count, which then lives until the window ends.
    putState(key, string.format('%d:%d', id, math.max(n - cost, 0)), other and stop - now or nil)
  end,
}
