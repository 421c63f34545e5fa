--[[
  fixed-window: at most `limit` units per aligned window floor(now / window).
  A calendar window arrives as `window` = { b0, b1, b2, b3 }, four consecutive period starts (ms) the app
  computed around its own clock; the window is the period holding the server's now ([b0,b1), [b1,b2) or
  [b2,b3)), its id the period's start. A now outside [b0, b3) fails the decision (clocks a period apart).

  Fragment of algorithm id 1 (the fragment contract is in decide.lua's header): helpers, then its check,
  commit and refund blocks. Inputs: the policy's state key, cost (units), limit (units per window), window (ms,
  or the four period starts), now (server ms), token (a settlement's charge time, ms, or ''). Uses state.lua.
  KEY    state string "<window id>:<units counted in that window>" (state.lua)
  check  s1 = the window id, s2 = the new count, s3 = whether the key holds another window (or nothing); more =
         ms until more quota: the window's end once anything is counted in it, else 0
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

--@check
-- The window holding now (its id, its end), and the units counted in it: inline, as a call costs more than the work.
local id, stop
if fixedWindowType(window) == 'number' then
  id = math.floor(now / window)
  stop = (id + 1) * window
else
  id, stop = calendarPeriod(window, now)
end
local n, fresh = 0, true
local v = redis.call('GET', key)
if v then
  local w, c = string.match(v, '^(%d+):(%d+)$')
  if not w then foreignValue(key, v) end
  if tonumber(w) == id then n, fresh = tonumber(c), false end
end
local ends = stop - now
if n + cost <= limit then
  ok, remaining, reset, retry, delay = true, limit - n - cost, 0, 0, 0
  if n + cost > 0 then reset = ends end
  s1, s2, s3 = id, n + cost, fresh
else
  ok, remaining, reset, retry, delay = false, limit - n, 0, ends, 0
  if n > 0 then reset = ends end
end
more = reset
--@commit
-- The key lives until its window ends: set once per window, kept on every later hit.
if s2 ~= 0 and (s3 or cost ~= 0) then putState(key, string.format('%d:%d', s1, s2), s3 and reset or nil) end
--@refund
local id, start, stop
if fixedWindowType(window) == 'number' then
  id = math.floor(now / window)
  start, stop = id * window, (id + 1) * window
else
  start, stop = calendarPeriod(window, now)
  id = start
end
-- A settlement's token is when its units were charged: units of an earlier window ended with it.
local at = tonumber(token)
if cost >= 0 and at and at < start then return end
-- The units counted in window id, and whether the key holds another window (or nothing).
local n, other = 0, true
local v = redis.call('GET', key)
if v then
  local w, c = string.match(v, '^(%d+):(%d+)$')
  if not w then foreignValue(key, v) end
  if tonumber(w) == id then n, other = tonumber(c), false end
end
if other and cost >= 0 then return end
-- A negative cost is a penalty: it may open the window's count, which then lives until the window ends.
putState(key, string.format('%d:%d', id, math.max(n - cost, 0)), other and stop - now or nil)
