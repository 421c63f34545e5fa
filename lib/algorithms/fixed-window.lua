--[[
  fixed-window: at most `limit` units per aligned window floor(now / window).
  A calendar window arrives as `window` = { b0, b1, b2, b3 }, four consecutive period starts (ms) the app
  computed around its own clock; the window is the period holding the server's now ([b0,b1), [b1,b2) or
  [b2,b3)), its id the period's start. A now outside [b0, b3) fails the decision (clocks a period apart).

  Fragment of algorithm id 1 (the fragment contract is in decide.lua's header): helpers, then its check,
  commit, refund, undo and lock blocks. Inputs: the policy's state key, cost (units), limit (units per window),
  window (ms, or the four period starts), now (server ms), token (a settlement's charge time, ms, or '').
  KEY    an integer counter of the window holding now, which expires when that window ends (set on its first
         hit), so a hit costs one INCRBY; plus FIXED_WINDOW_MARK while a lockout may be in force on the policy
         (written with the lockout, see lock), so the host reads the lockout key only on a window's first hit
         or under that mark
  check  charges a consume at once (INCRBY: one command where a read and a write would be two); the host
         takes the units back with undo when the decision does not commit. Given no now (a one-policy call),
         it reads the clock only on a window's first hit: the counter's TTL is the rest of its window.
         s1 = the units charged, s2 = the mark to clear on commit (0 for none), s3 = whether the window was
         empty; mark = whether the host must read the policy's lockout key; more = ms until more quota: the
         window's end once anything is counted in it, else 0
  commit clears the mark (the check charged); undo takes back what the check charged (the key goes when the
         window held nothing else); lock marks a counter that exists (one that does not makes the next hit a
         first one, which reads the lockout key); refund gives units back in the same window (a negative cost,
         a penalty, charges them, whatever the count).
]]
-- Added to a counter while a lockout may be in force; 2^51, a string: Lua 5.1 prints a number that big as a float.
local FIXED_WINDOW_MARK, FIXED_WINDOW_UNMARK, FIXED_WINDOW_MARKED = '2251799813685248', '-2251799813685248', 2251799813685248

-- A calendar window's period holding now: its start (the window id) and its end, ms.
local function calendarPeriod(window, now)
  for i = 1, 3 do
    if now >= window[i] and now < window[i + 1] then return window[i], window[i + 1] end
  end
  -- %d: a whole number that cjson decoded as a float (Lua 5.4) still prints without an exponent.
  error({ err = string.format('calendar window: the store\'s clock (%d ms) is outside the periods computed on this host'
    .. ' (%d to %d ms): the clocks differ by more than a period.', now, window[1], window[4]) })
end

-- The counter's value as a number; someone else's data under the key fails the decision.
local function fixedWindowCount(key, v)
  local n = tonumber(v)
  if not n or n < 0 or n % 1 ~= 0 then foreignValue(key, v) end
  return n
end

--@check
local n, ends, ttl, start, stop
s1, s2 = 0, 0
if now then
  -- The window holding now (its start, its end), before anything is charged: a calendar window may fail.
  if type(window) == 'number' then
    start = math.floor(now / window) * window
    stop = start + window
  else
    start, stop = calendarPeriod(window, now)
  end
end
if cost > 0 then
  local m = redis.pcall('INCRBY', key, cost)
  if type(m) ~= 'number' then
    -- Someone else's data under the key; any other error (a key this node does not serve, an ACL) as it is.
    if string.find(m.err, 'not an integer', 1, true) then foreignValue(key, redis.call('GET', key)) end
    error(m)
  end
  n, s1 = m - cost, cost
  if n < 0 then
    -- An integer no counter holds: someone else's, given back as it was.
    redis.call('DECRBY', key, cost)
    foreignValue(key, tostring(n))
  end
else
  local v = redis.call('GET', key)
  n = v and fixedWindowCount(key, v) or 0
end
if n > 0 and not now then
  -- The counter expires when its window ends, so its TTL is what is left of the window: no clock needed. In
  -- its last 2 ms it may be the previous window's (Redis judges expiry at the script's start), which the clock tells.
  ttl = redis.call('PTTL', key)
  if ttl > 1 then ends = ttl end
end
if not ends then
  if not start then
    -- A one-policy call that read no clock yet; its window is a number of ms (a calendar window goes to
    -- decide.lua, with the clock).
    --@now
    start = math.floor(now / window) * window
    stop = start + window
  end
  ends = stop - now
  if n > 0 and now - start <= 1 and stop - start > 3 and (ttl or redis.call('PTTL', key)) + now <= start + 1 then
    -- The previous window's counter, expiring at this window's start: Redis drops a key only after its time,
    -- judged at the script's start, which TIME may read a ms later.
    if cost > 0 then redis.call('SET', key, cost, 'PX', ends) end
    n = 0
  elseif (n == 0 and cost > 0) or ttl == -1 then
    redis.call('PEXPIRE', key, ends)
  end
end
s3 = n == 0
if n >= FIXED_WINDOW_MARKED then
  n, s2 = n - FIXED_WINDOW_MARKED, 1
end
mark = s3 or s2 == 1
if n + cost <= limit then
  ok, remaining, reset, retry, delay = true, limit - n - cost, 0, 0, 0
  if n + cost > 0 then reset = ends end
else
  ok, remaining, reset, retry, delay = false, limit - n, 0, ends, 0
  if n > 0 then reset = ends end
end
more = reset
--@commit
if s2 == 1 then redis.call('INCRBY', key, FIXED_WINDOW_UNMARK) end
--@undo
if s1 > 0 then
  if s3 and s2 == 0 then redis.call('DEL', key) else redis.call('DECRBY', key, s1) end
end
--@lock
local v = redis.call('GET', key)
if v and fixedWindowCount(key, v) < FIXED_WINDOW_MARKED then redis.call('INCRBY', key, FIXED_WINDOW_MARK) end
--@refund
local start, stop
if type(window) == 'number' then
  start = math.floor(now / window) * window
  stop = start + window
else
  start, stop = calendarPeriod(window, now)
end
-- A settlement's token is when its units were charged: units of an earlier window ended with it.
local at = tonumber(token)
if cost >= 0 and at and at < start then return end
local v = redis.call('GET', key)
local n = v and fixedWindowCount(key, v)
if not n then
  -- A negative cost is a penalty: it may open the window's count, which then lives until the window ends.
  if cost < 0 then redis.call('SET', key, -cost, 'PX', stop - now) end
  return
end
local marked = n >= FIXED_WINDOW_MARKED
if marked then n = n - FIXED_WINDOW_MARKED end
if n > 0 and now - start <= 1 and stop - start > 3 and redis.call('PTTL', key) + now <= start + 1 then
  if cost < 0 then redis.call('SET', key, -cost, 'PX', stop - now) end
  return
end
redis.call('INCRBY', key, math.max(n - cost, 0) - n)
