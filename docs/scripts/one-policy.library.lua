#!lua name=ratelimit_2608b056382f
do
--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
--[[
  State kept in a string key: whole numbers joined by ':' (fixed-window, sliding-window and the buckets).
  One GET and one SET … PX (or KEEPTTL) do what HMGET, HSET and PEXPIRE did on a small hash, and the key is
  16 bytes smaller (bench/README.md). Spliced in before the fragments when a script holds one of them; no KEYS
  or ARGV of its own: each helper gets the key its fragment was passed.
    foreignValue(key, v)     raises { err = message } naming the key: a value the rate limiter did not write
    putState(key, value, px) SET value, PX px (ms), or KEEPTTL when px is nil; replies nothing
]]
-- Fails the decision on a value v of `key` that its algorithm's pattern does not match: someone else's data
-- under our prefix. (Callers match inline: a call per decision would cost more than the match.)
local function foreignValue(key, v)
  error({ err = string.format('Redis key "%s" holds "%s", which the rate limiter did not write: another application'
    .. ' writes under this prefix. Give the rate limiter its own \'prefix\' or delete the key.', key, string.sub(v, 1, 40)) })
end


--[[
  Template: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. redis-scripts.ts makes one function of it per algorithm, the algorithm's check and commit
  blocks written in where the markers stand (no fragment table, no closure per block): one-policy.lua runs its one
  algorithm's function once per call; decide.lua keeps one per algorithm in DECIDE_ONE[id] for every such
  decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms; nil in a one-policy call of an algorithm that
              reads the clock only when it needs it (fixed-window), where the now marker reads it then, once,
              into reply[1] too
    mode      'c' consume or 'p' peek
    key, bkey the call's KEYS: state key, lockout key (a tracker's deny is answered before any script runs:
              lib/pipeline/deny-list.ts holds every deny in force, no decision reads a deny key)
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
    hold      units the decision must leave untaken (a `reserve` for higher criticalities; 0 = none): the counter
              is checked with cost + hold, only cost is charged, and a decision that fits without the hold alone
              is VERDICT_RESERVED (no lockout), with the wait of the held check
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms, more ms },
    as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts); with a hold, remaining is what is left once the hold is kept. Raises on
    someone else's data under a key (the check does).
  From its host: the VERDICT_* locals and the algorithm's helpers; it reads no other variable of the script.
  What stands before the function is written once per script, the function once per algorithm.
]]

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




redis.register_function('rl_2608b056382f_fw', function(KEYS, ARGV)
local now
if ARGV[2] then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit

local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
repeat
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  do
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
        if not now then
          local t = redis.call('TIME')
          now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
          reply[1] = now
        end
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
  end
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        reply[1] = now
      end
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        do
          if s1 > 0 then
            if s3 and s2 == 0 then redis.call('DEL', key) else redis.call('DECRBY', key, s1) end
          end
        end
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        break
      end
    end
  end
  local capacity = limit
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    do
      if s1 > 0 then
        if s3 and s2 == 0 then redis.call('DEL', key) else redis.call('DECRBY', key, s1) end
      end
    end
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    do
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
          if not now then
            local t = redis.call('TIME')
            now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            reply[1] = now
          end
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
    end
    if fits then
      if mode ~= 'c' then delay = 0 end
    else
      reserved = ok
      remaining, reset, retry, delay, more = heldRemaining, heldReset, heldRetry, 0, heldMore
    end
  end
  -- What the decision's class may still take: the units held back are not its own.
  if hold > 0 then remaining = math.max(remaining - hold, 0) end
  if fits then
    if mode == 'c' then
      do
        if s2 == 1 then redis.call('INCRBY', key, FIXED_WINDOW_UNMARK) end
      end
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    break
  end
  do
    if s1 > 0 then
      if s3 and s2 == 0 then redis.call('DEL', key) else redis.call('DECRBY', key, s1) end
    end
  end
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      reply[1] = now
    end
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    do
      local v = redis.call('GET', key)
      if v and fixedWindowCount(key, v) < FIXED_WINDOW_MARKED then redis.call('INCRBY', key, FIXED_WINDOW_MARK) end
    end
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
until true
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply

end)
end
do
--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
--[[
  State kept in a string key: whole numbers joined by ':' (fixed-window, sliding-window and the buckets).
  One GET and one SET … PX (or KEEPTTL) do what HMGET, HSET and PEXPIRE did on a small hash, and the key is
  16 bytes smaller (bench/README.md). Spliced in before the fragments when a script holds one of them; no KEYS
  or ARGV of its own: each helper gets the key its fragment was passed.
    foreignValue(key, v)     raises { err = message } naming the key: a value the rate limiter did not write
    putState(key, value, px) SET value, PX px (ms), or KEEPTTL when px is nil; replies nothing
]]
-- Fails the decision on a value v of `key` that its algorithm's pattern does not match: someone else's data
-- under our prefix. (Callers match inline: a call per decision would cost more than the match.)
local function foreignValue(key, v)
  error({ err = string.format('Redis key "%s" holds "%s", which the rate limiter did not write: another application'
    .. ' writes under this prefix. Give the rate limiter its own \'prefix\' or delete the key.', key, string.sub(v, 1, 40)) })
end

-- Writes `key`'s value, expiring in px ms, or keeping the key's expiry when px is nil (a window's expiry,
-- set once when it moves).
local function putState(key, value, px)
  if px then
    redis.call('SET', key, value, 'PX', px)
  else
    redis.call('SET', key, value, 'KEEPTTL')
  end
end

--[[
  Template: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. redis-scripts.ts makes one function of it per algorithm, the algorithm's check and commit
  blocks written in where the markers stand (no fragment table, no closure per block): one-policy.lua runs its one
  algorithm's function once per call; decide.lua keeps one per algorithm in DECIDE_ONE[id] for every such
  decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms; nil in a one-policy call of an algorithm that
              reads the clock only when it needs it (fixed-window), where the now marker reads it then, once,
              into reply[1] too
    mode      'c' consume or 'p' peek
    key, bkey the call's KEYS: state key, lockout key (a tracker's deny is answered before any script runs:
              lib/pipeline/deny-list.ts holds every deny in force, no decision reads a deny key)
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
    hold      units the decision must leave untaken (a `reserve` for higher criticalities; 0 = none): the counter
              is checked with cost + hold, only cost is charged, and a decision that fits without the hold alone
              is VERDICT_RESERVED (no lockout), with the wait of the held check
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms, more ms },
    as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts); with a hold, remaining is what is left once the hold is kept. Raises on
    someone else's data under a key (the check does).
  From its host: the VERDICT_* locals and the algorithm's helpers; it reads no other variable of the script.
  What stands before the function is written once per script, the function once per algorithm.
]]

--[[
  sliding-window: Cloudflare's approximation. Counts of the current and previous aligned windows; the
  previous one weighs by how much of it still overlaps the sliding window:
  allowed iff prev·(W − e) + (cur + cost)·W <= limit·W, e = ms into the current window (exact integers).

  Fragment of algorithm id 2 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units), limit (units per window), window (W, ms),
  now (server ms), token (a settlement's charge time, ms, or ''). Uses state.lua.
  KEY    state string "<current window id>:<its count>:<previous window's count>" (state.lua)
  check  s1 = the window id, s2 = the new count, s3 = prev, s4 = whether the expiry moves; more = ms until the
         weighted count has dropped by enough to raise floor(remaining)
]]
local function slidingCounts(key, window, now)
  local id = math.floor(now / window)
  local v = redis.call('GET', key)
  if not v then return id, 0, 0, true end
  local w, c, p = string.match(v, '^(%d+):(%d+):(%d+)$')
  if not w then foreignValue(key, v) end
  local sid = tonumber(w)
  if sid == id then return id, tonumber(c), tonumber(p), false end
  if sid == id - 1 then return id, 0, tonumber(c), true end
  return id, 0, 0, true
end

-- Writes the counts, expiring in px ms, or keeping the key's expiry when px is nil.
local function slidingStore(key, id, cur, prev, px)
  putState(key, string.format('%d:%d:%d', id, cur, prev), px)
end

local function slidingReset(id, cur, prev, window, now)
  if cur > 0 then return (id + 2) * window - now end
  if prev > 0 then return (id + 1) * window - now end
  return 0
end

-- The earliest time (ms from now) a request of cost fits: later in this window, or in the next one.
local function slidingRetry(id, e, cur, prev, cost, limit, window, now)
  local room = (limit - cur - cost) * window
  if room >= 0 and prev > 0 then
    local e2 = window - math.floor(room / prev)
    if e2 < window then return e2 - e end
  end
  local e2 = 0
  if cur > 0 then e2 = math.max(window - math.floor((limit - cost) * window / cur), 0) end
  return (id + 1) * window + e2 - now
end

-- When floor(remaining) next grows: when one more unit than the `remaining` left would fit. 0 when nothing is used.
local function slidingMore(id, e, cur, prev, remaining, limit, window, now)
  if cur == 0 and prev == 0 then return 0 end
  return slidingRetry(id, e, cur, prev, remaining + 1, limit, window, now)
end




redis.register_function('rl_2608b056382f_s', function(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit

local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
repeat
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  do
    local id, cur, prev, fresh = slidingCounts(key, window, now)
    local e = now - id * window
    local used = prev * (window - e) + cur * window
    if used + cost * window <= limit * window then
      ok, remaining, retry, delay = true, math.floor((limit * window - used - cost * window) / window), 0, 0
      reset = slidingReset(id, cur + cost, prev, window, now)
      more = slidingMore(id, e, cur + cost, prev, remaining, limit, window, now)
      s1, s2, s3, s4 = id, cur + cost, prev, fresh or cur == 0
    else
      ok, remaining, delay = false, math.floor(math.max(limit * window - used, 0) / window), 0
      reset = slidingReset(id, cur, prev, window, now)
      retry = slidingRetry(id, e, cur, prev, cost, limit, window, now)
      more = slidingMore(id, e, cur, prev, remaining, limit, window, now)
    end
  end
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        reply[1] = now
      end
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        break
      end
    end
  end
  local capacity = limit
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    do
      local id, cur, prev, fresh = slidingCounts(key, window, now)
      local e = now - id * window
      local used = prev * (window - e) + cur * window
      if used + cost * window <= limit * window then
        ok, remaining, retry, delay = true, math.floor((limit * window - used - cost * window) / window), 0, 0
        reset = slidingReset(id, cur + cost, prev, window, now)
        more = slidingMore(id, e, cur + cost, prev, remaining, limit, window, now)
        s1, s2, s3, s4 = id, cur + cost, prev, fresh or cur == 0
      else
        ok, remaining, delay = false, math.floor(math.max(limit * window - used, 0) / window), 0
        reset = slidingReset(id, cur, prev, window, now)
        retry = slidingRetry(id, e, cur, prev, cost, limit, window, now)
        more = slidingMore(id, e, cur, prev, remaining, limit, window, now)
      end
    end
    if fits then
      if mode ~= 'c' then delay = 0 end
    else
      reserved = ok
      remaining, reset, retry, delay, more = heldRemaining, heldReset, heldRetry, 0, heldMore
    end
  end
  -- What the decision's class may still take: the units held back are not its own.
  if hold > 0 then remaining = math.max(remaining - hold, 0) end
  if fits then
    if mode == 'c' then
      do
        if reset ~= 0 then slidingStore(key, s1, s2, s3, s4 and reset or nil) end
      end
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    break
  end
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      reply[1] = now
    end
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
until true
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply

end)
end
do
--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
--[[
  Template: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. redis-scripts.ts makes one function of it per algorithm, the algorithm's check and commit
  blocks written in where the markers stand (no fragment table, no closure per block): one-policy.lua runs its one
  algorithm's function once per call; decide.lua keeps one per algorithm in DECIDE_ONE[id] for every such
  decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms; nil in a one-policy call of an algorithm that
              reads the clock only when it needs it (fixed-window), where the now marker reads it then, once,
              into reply[1] too
    mode      'c' consume or 'p' peek
    key, bkey the call's KEYS: state key, lockout key (a tracker's deny is answered before any script runs:
              lib/pipeline/deny-list.ts holds every deny in force, no decision reads a deny key)
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
    hold      units the decision must leave untaken (a `reserve` for higher criticalities; 0 = none): the counter
              is checked with cost + hold, only cost is charged, and a decision that fits without the hold alone
              is VERDICT_RESERVED (no lockout), with the wait of the held check
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms, more ms },
    as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts); with a hold, remaining is what is left once the hold is kept. Raises on
    someone else's data under a key (the check does).
  From its host: the VERDICT_* locals and the algorithm's helpers; it reads no other variable of the script.
  What stands before the function is written once per script, the function once per algorithm.
]]

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



redis.register_function('rl_2608b056382f_sl', function(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit

local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
repeat
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  do
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
  end
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        reply[1] = now
      end
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        break
      end
    end
  end
  local capacity = limit
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    do
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
    end
    if fits then
      if mode ~= 'c' then delay = 0 end
    else
      reserved = ok
      remaining, reset, retry, delay, more = heldRemaining, heldReset, heldRetry, 0, heldMore
    end
  end
  -- What the decision's class may still take: the units held back are not its own.
  if hold > 0 then remaining = math.max(remaining - hold, 0) end
  if fits then
    if mode == 'c' then
      do
        if cost ~= 0 then slidingLogAdd(key, now, cost, window) end
      end
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    break
  end
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      reply[1] = now
    end
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
until true
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply

end)
end
do
--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
--[[
  State kept in a string key: whole numbers joined by ':' (fixed-window, sliding-window and the buckets).
  One GET and one SET … PX (or KEEPTTL) do what HMGET, HSET and PEXPIRE did on a small hash, and the key is
  16 bytes smaller (bench/README.md). Spliced in before the fragments when a script holds one of them; no KEYS
  or ARGV of its own: each helper gets the key its fragment was passed.
    foreignValue(key, v)     raises { err = message } naming the key: a value the rate limiter did not write
    putState(key, value, px) SET value, PX px (ms), or KEEPTTL when px is nil; replies nothing
]]
-- Fails the decision on a value v of `key` that its algorithm's pattern does not match: someone else's data
-- under our prefix. (Callers match inline: a call per decision would cost more than the match.)
local function foreignValue(key, v)
  error({ err = string.format('Redis key "%s" holds "%s", which the rate limiter did not write: another application'
    .. ' writes under this prefix. Give the rate limiter its own \'prefix\' or delete the key.', key, string.sub(v, 1, 40)) })
end


--[[
  Shared by token-bucket, gcra and leaky-bucket (see bucket.ts): decide a request against a bucket whose
  debt (distance from full, in units × window ms; `limit` of it repaid per ms) is `debt`. Spliced in before
  their fragments when a script holds one of them; no KEYS, ARGV or redis calls.
  bucket(debt, cost (units), limit (units per window), window (ms), burst (units: the capacity))
    -> allowed, remaining (units), reset ms, retry ms, delay = 0, more = ms until the next whole unit, debt after
       (several values, not a table: a check block assigns them to its outputs, decide.lua's header)
  Needs ceildiv from its host.
]]
-- Ms until the level (capacity - debt) reaches its next multiple of window: one more whole unit; 0 at full.
-- A level below zero (a penalty, an overdraft) reports 0 units until it is back to one whole unit.
local function bucketMore(debt, capacity, limit, window)
  if debt <= 0 then return 0 end
  local level = capacity - debt
  if level < 0 then return ceildiv(window - level, limit) end
  return ceildiv(window - level % window, limit)
end

local function bucket(debt, cost, limit, window, burst)
  local capacity = burst * window
  local need = cost * window
  if debt + need <= capacity then
    local after = debt + need
    return true, math.floor((capacity - after) / window), ceildiv(after, limit), 0, 0, bucketMore(after, capacity, limit, window), after
  end
  return false, math.floor((capacity - debt) / window), ceildiv(debt, limit), ceildiv(debt + need - capacity, limit), 0, bucketMore(debt, capacity, limit, window), debt
end

--[[
  Template: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. redis-scripts.ts makes one function of it per algorithm, the algorithm's check and commit
  blocks written in where the markers stand (no fragment table, no closure per block): one-policy.lua runs its one
  algorithm's function once per call; decide.lua keeps one per algorithm in DECIDE_ONE[id] for every such
  decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms; nil in a one-policy call of an algorithm that
              reads the clock only when it needs it (fixed-window), where the now marker reads it then, once,
              into reply[1] too
    mode      'c' consume or 'p' peek
    key, bkey the call's KEYS: state key, lockout key (a tracker's deny is answered before any script runs:
              lib/pipeline/deny-list.ts holds every deny in force, no decision reads a deny key)
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
    hold      units the decision must leave untaken (a `reserve` for higher criticalities; 0 = none): the counter
              is checked with cost + hold, only cost is charged, and a decision that fits without the hold alone
              is VERDICT_RESERVED (no lockout), with the wait of the held check
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms, more ms },
    as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts); with a hold, remaining is what is left once the hold is kept. Raises on
    someone else's data under a key (the check does).
  From its host: the VERDICT_* locals and the algorithm's helpers; it reads no other variable of the script.
  What stands before the function is written once per script, the function once per algorithm.
]]

--[[
  token-bucket: starts full with `burst` tokens, refills continuously at limit / window; a request takes `cost`.
  Tokens are kept scaled by the window, so refill keeps every fraction (see bucket.lua).

  Fragment of algorithm id 4 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units), limit (units refilled per window), window
  (ms), burst (units: the capacity), now (server ms). Uses state.lua and bucket.lua.
  KEY    state string "<tokens × k (scaled; below 0 after an overdraft)>:<last refill, ms>:<k = the window the
         tokens are scaled by>" (state.lua)
  check  bucket.lua's values; s1 = the debt after, s2 = the time it refilled up to (ms)
]]
local function tokenBucketDebt(key, limit, window, burst, now)
  local v = redis.call('GET', key)
  local capacity = burst * window
  if not v then return 0, now end
  local s, last, k = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not s then foreignValue(key, v) end
  s, last, k = tonumber(s), tonumber(last), tonumber(k)
  if k ~= window then s = math.floor(s * window / k) end
  if now > last then s = s + (now - last) * limit else now = last end
  if s > capacity then s = capacity end
  return capacity - s, now
end

-- Writes the bucket's debt (distance from full), refilled up to `at`; a full bucket needs no key.
local function tokenBucketStore(key, debt, at, limit, window, burst)
  if debt == 0 then redis.call('DEL', key) return end
  redis.call('SET', key, string.format('%d:%d:%d', burst * window - debt, at, window), 'PX', ceildiv(debt, limit))
end




redis.register_function('rl_2608b056382f_t', function(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit
burst, token = tonumber(token, 16), ''
local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
repeat
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  do
    local debt, at = tokenBucketDebt(key, limit, window, burst, now)
    ok, remaining, reset, retry, delay, more, s1 = bucket(debt, cost, limit, window, burst)
    s2 = at
  end
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        reply[1] = now
      end
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        break
      end
    end
  end
  local capacity = burst
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    do
      local debt, at = tokenBucketDebt(key, limit, window, burst, now)
      ok, remaining, reset, retry, delay, more, s1 = bucket(debt, cost, limit, window, burst)
      s2 = at
    end
    if fits then
      if mode ~= 'c' then delay = 0 end
    else
      reserved = ok
      remaining, reset, retry, delay, more = heldRemaining, heldReset, heldRetry, 0, heldMore
    end
  end
  -- What the decision's class may still take: the units held back are not its own.
  if hold > 0 then remaining = math.max(remaining - hold, 0) end
  if fits then
    if mode == 'c' then
      do
        tokenBucketStore(key, s1, s2, limit, window, burst)
      end
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    break
  end
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      reply[1] = now
    end
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
until true
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply

end)
end
do
--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
--[[
  State kept in a string key: whole numbers joined by ':' (fixed-window, sliding-window and the buckets).
  One GET and one SET … PX (or KEEPTTL) do what HMGET, HSET and PEXPIRE did on a small hash, and the key is
  16 bytes smaller (bench/README.md). Spliced in before the fragments when a script holds one of them; no KEYS
  or ARGV of its own: each helper gets the key its fragment was passed.
    foreignValue(key, v)     raises { err = message } naming the key: a value the rate limiter did not write
    putState(key, value, px) SET value, PX px (ms), or KEEPTTL when px is nil; replies nothing
]]
-- Fails the decision on a value v of `key` that its algorithm's pattern does not match: someone else's data
-- under our prefix. (Callers match inline: a call per decision would cost more than the match.)
local function foreignValue(key, v)
  error({ err = string.format('Redis key "%s" holds "%s", which the rate limiter did not write: another application'
    .. ' writes under this prefix. Give the rate limiter its own \'prefix\' or delete the key.', key, string.sub(v, 1, 40)) })
end


--[[
  Shared by token-bucket, gcra and leaky-bucket (see bucket.ts): decide a request against a bucket whose
  debt (distance from full, in units × window ms; `limit` of it repaid per ms) is `debt`. Spliced in before
  their fragments when a script holds one of them; no KEYS, ARGV or redis calls.
  bucket(debt, cost (units), limit (units per window), window (ms), burst (units: the capacity))
    -> allowed, remaining (units), reset ms, retry ms, delay = 0, more = ms until the next whole unit, debt after
       (several values, not a table: a check block assigns them to its outputs, decide.lua's header)
  Needs ceildiv from its host.
]]
-- Ms until the level (capacity - debt) reaches its next multiple of window: one more whole unit; 0 at full.
-- A level below zero (a penalty, an overdraft) reports 0 units until it is back to one whole unit.
local function bucketMore(debt, capacity, limit, window)
  if debt <= 0 then return 0 end
  local level = capacity - debt
  if level < 0 then return ceildiv(window - level, limit) end
  return ceildiv(window - level % window, limit)
end

local function bucket(debt, cost, limit, window, burst)
  local capacity = burst * window
  local need = cost * window
  if debt + need <= capacity then
    local after = debt + need
    return true, math.floor((capacity - after) / window), ceildiv(after, limit), 0, 0, bucketMore(after, capacity, limit, window), after
  end
  return false, math.floor((capacity - debt) / window), ceildiv(debt, limit), ceildiv(debt + need - capacity, limit), 0, bucketMore(debt, capacity, limit, window), debt
end

--[[
  Template: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. redis-scripts.ts makes one function of it per algorithm, the algorithm's check and commit
  blocks written in where the markers stand (no fragment table, no closure per block): one-policy.lua runs its one
  algorithm's function once per call; decide.lua keeps one per algorithm in DECIDE_ONE[id] for every such
  decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms; nil in a one-policy call of an algorithm that
              reads the clock only when it needs it (fixed-window), where the now marker reads it then, once,
              into reply[1] too
    mode      'c' consume or 'p' peek
    key, bkey the call's KEYS: state key, lockout key (a tracker's deny is answered before any script runs:
              lib/pipeline/deny-list.ts holds every deny in force, no decision reads a deny key)
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
    hold      units the decision must leave untaken (a `reserve` for higher criticalities; 0 = none): the counter
              is checked with cost + hold, only cost is charged, and a decision that fits without the hold alone
              is VERDICT_RESERVED (no lockout), with the wait of the held check
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms, more ms },
    as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts); with a hold, remaining is what is left once the hold is kept. Raises on
    someone else's data under a key (the check does).
  From its host: the VERDICT_* locals and the algorithm's helpers; it reads no other variable of the script.
  What stands before the function is written once per script, the function once per algorithm.
]]

--[[
  gcra: generic cell rate algorithm. One theoretical arrival time (TAT) per key; a request of `cost` is
  allowed iff max(tat, now) + cost·T - burst·T <= now, T = window / limit.
  Measured in 1/limit ms the emission interval T is exactly `window`, so nothing is rounded (bucket.lua).

  Fragment of algorithm id 5 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units), limit (units per window), window (ms), burst
  (units: the capacity), now (server ms). Uses state.lua and bucket.lua.
  KEY    state string "<t>:<r>:<l>:<w>" (state.lua): t = TAT, whole ms; r = the TAT's remainder in 1/l ms; l, w =
         the limit and window the TAT was measured with, so a changed rate rescales what is owed instead of
         repaying it at the old rate
  check  bucket.lua's values; s1 = the debt after
]]
local function gcraStore(key, debt, limit, window, now)
  if debt == 0 then redis.call('DEL', key) return end
  redis.call('SET', key, string.format('%d:%d:%d:%d', now + math.floor(debt / limit), debt % limit, limit, window),
    'PX', ceildiv(debt, limit))
end

-- What is owed, in window-scaled units. A TAT measured with another limit or window is re-expressed at
-- once in the current one (a change of units, not a charge), so the new rate applies from this moment.
local function gcraDebt(key, limit, window, now)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local t, r, l, w = string.match(v, '^(%d+):(%d+):(%d+):(%d+)$')
  if not t then foreignValue(key, v) end
  l, w = tonumber(l), tonumber(w)
  local debt = (tonumber(t) - now) * l + tonumber(r)
  if debt <= 0 then return 0 end
  if l ~= limit or w ~= window then
    if w ~= window then debt = ceildiv(debt * window, w) end
    gcraStore(key, debt, limit, window, now)
  end
  return debt
end




redis.register_function('rl_2608b056382f_g', function(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit
burst, token = tonumber(token, 16), ''
local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
repeat
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  do
    ok, remaining, reset, retry, delay, more, s1 = bucket(gcraDebt(key, limit, window, now), cost, limit, window, burst)
  end
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        reply[1] = now
      end
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        break
      end
    end
  end
  local capacity = burst
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    do
      ok, remaining, reset, retry, delay, more, s1 = bucket(gcraDebt(key, limit, window, now), cost, limit, window, burst)
    end
    if fits then
      if mode ~= 'c' then delay = 0 end
    else
      reserved = ok
      remaining, reset, retry, delay, more = heldRemaining, heldReset, heldRetry, 0, heldMore
    end
  end
  -- What the decision's class may still take: the units held back are not its own.
  if hold > 0 then remaining = math.max(remaining - hold, 0) end
  if fits then
    if mode == 'c' then
      do
        gcraStore(key, s1, limit, window, now)
      end
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    break
  end
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      reply[1] = now
    end
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
until true
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply

end)
end
do
--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
--[[
  State kept in a string key: whole numbers joined by ':' (fixed-window, sliding-window and the buckets).
  One GET and one SET … PX (or KEEPTTL) do what HMGET, HSET and PEXPIRE did on a small hash, and the key is
  16 bytes smaller (bench/README.md). Spliced in before the fragments when a script holds one of them; no KEYS
  or ARGV of its own: each helper gets the key its fragment was passed.
    foreignValue(key, v)     raises { err = message } naming the key: a value the rate limiter did not write
    putState(key, value, px) SET value, PX px (ms), or KEEPTTL when px is nil; replies nothing
]]
-- Fails the decision on a value v of `key` that its algorithm's pattern does not match: someone else's data
-- under our prefix. (Callers match inline: a call per decision would cost more than the match.)
local function foreignValue(key, v)
  error({ err = string.format('Redis key "%s" holds "%s", which the rate limiter did not write: another application'
    .. ' writes under this prefix. Give the rate limiter its own \'prefix\' or delete the key.', key, string.sub(v, 1, 40)) })
end


--[[
  Shared by token-bucket, gcra and leaky-bucket (see bucket.ts): decide a request against a bucket whose
  debt (distance from full, in units × window ms; `limit` of it repaid per ms) is `debt`. Spliced in before
  their fragments when a script holds one of them; no KEYS, ARGV or redis calls.
  bucket(debt, cost (units), limit (units per window), window (ms), burst (units: the capacity))
    -> allowed, remaining (units), reset ms, retry ms, delay = 0, more = ms until the next whole unit, debt after
       (several values, not a table: a check block assigns them to its outputs, decide.lua's header)
  Needs ceildiv from its host.
]]
-- Ms until the level (capacity - debt) reaches its next multiple of window: one more whole unit; 0 at full.
-- A level below zero (a penalty, an overdraft) reports 0 units until it is back to one whole unit.
local function bucketMore(debt, capacity, limit, window)
  if debt <= 0 then return 0 end
  local level = capacity - debt
  if level < 0 then return ceildiv(window - level, limit) end
  return ceildiv(window - level % window, limit)
end

local function bucket(debt, cost, limit, window, burst)
  local capacity = burst * window
  local need = cost * window
  if debt + need <= capacity then
    local after = debt + need
    return true, math.floor((capacity - after) / window), ceildiv(after, limit), 0, 0, bucketMore(after, capacity, limit, window), after
  end
  return false, math.floor((capacity - debt) / window), ceildiv(debt, limit), ceildiv(debt + need - capacity, limit), 0, bucketMore(debt, capacity, limit, window), debt
end

--[[
  Template: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. redis-scripts.ts makes one function of it per algorithm, the algorithm's check and commit
  blocks written in where the markers stand (no fragment table, no closure per block): one-policy.lua runs its one
  algorithm's function once per call; decide.lua keeps one per algorithm in DECIDE_ONE[id] for every such
  decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms; nil in a one-policy call of an algorithm that
              reads the clock only when it needs it (fixed-window), where the now marker reads it then, once,
              into reply[1] too
    mode      'c' consume or 'p' peek
    key, bkey the call's KEYS: state key, lockout key (a tracker's deny is answered before any script runs:
              lib/pipeline/deny-list.ts holds every deny in force, no decision reads a deny key)
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
    hold      units the decision must leave untaken (a `reserve` for higher criticalities; 0 = none): the counter
              is checked with cost + hold, only cost is charged, and a decision that fits without the hold alone
              is VERDICT_RESERVED (no lockout), with the wait of the held check
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms, more ms },
    as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts); with a hold, remaining is what is left once the hold is kept. Raises on
    someone else's data under a key (the check does).
  From its host: the VERDICT_* locals and the algorithm's helpers; it reads no other variable of the script.
  What stands before the function is written once per script, the function once per algorithm.
]]

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




redis.register_function('rl_2608b056382f_l', function(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit
burst, token = tonumber(token, 16), ''
local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
repeat
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  do
    local level, at = leakyLevel(key, limit, window, now)
    ok, remaining, reset, retry, delay, more, s1 = bucket(level, cost, limit, window, burst)
    if ok then delay = ceildiv(level, limit) end
    s2 = at
  end
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        reply[1] = now
      end
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        break
      end
    end
  end
  local capacity = burst
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    do
      local level, at = leakyLevel(key, limit, window, now)
      ok, remaining, reset, retry, delay, more, s1 = bucket(level, cost, limit, window, burst)
      if ok then delay = ceildiv(level, limit) end
      s2 = at
    end
    if fits then
      if mode ~= 'c' then delay = 0 end
    else
      reserved = ok
      remaining, reset, retry, delay, more = heldRemaining, heldReset, heldRetry, 0, heldMore
    end
  end
  -- What the decision's class may still take: the units held back are not its own.
  if hold > 0 then remaining = math.max(remaining - hold, 0) end
  if fits then
    if mode == 'c' then
      do
        leakyStore(key, s1, s2, limit, window)
      end
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    break
  end
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      reply[1] = now
    end
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
until true
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply

end)
end
do
--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
--[[
  Template: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. redis-scripts.ts makes one function of it per algorithm, the algorithm's check and commit
  blocks written in where the markers stand (no fragment table, no closure per block): one-policy.lua runs its one
  algorithm's function once per call; decide.lua keeps one per algorithm in DECIDE_ONE[id] for every such
  decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms; nil in a one-policy call of an algorithm that
              reads the clock only when it needs it (fixed-window), where the now marker reads it then, once,
              into reply[1] too
    mode      'c' consume or 'p' peek
    key, bkey the call's KEYS: state key, lockout key (a tracker's deny is answered before any script runs:
              lib/pipeline/deny-list.ts holds every deny in force, no decision reads a deny key)
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
    hold      units the decision must leave untaken (a `reserve` for higher criticalities; 0 = none): the counter
              is checked with cost + hold, only cost is charged, and a decision that fits without the hold alone
              is VERDICT_RESERVED (no lockout), with the wait of the held check
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms, more ms },
    as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts); with a hold, remaining is what is left once the hold is kept. Raises on
    someone else's data under a key (the check does).
  From its host: the VERDICT_* locals and the algorithm's helpers; it reads no other variable of the script.
  What stands before the function is written once per script, the function once per algorithm.
]]

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



redis.register_function('rl_2608b056382f_cc', function(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit

local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
repeat
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  do
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
  end
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        reply[1] = now
      end
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        break
      end
    end
  end
  local capacity = limit
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    do
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
    end
    if fits then
      if mode ~= 'c' then delay = 0 end
    else
      reserved = ok
      remaining, reset, retry, delay, more = heldRemaining, heldReset, heldRetry, 0, heldMore
    end
  end
  -- What the decision's class may still take: the units held back are not its own.
  if hold > 0 then remaining = math.max(remaining - hold, 0) end
  if fits then
    if mode == 'c' then
      do
        if cost < 0 then
          renew(key, -cost, now + window, token)
          more = leaseMore(key, redis.call('ZCARD', key), limit, now)
          redis.call('PEXPIRE', key, reset)
        elseif cost > 0 then
          for i = 1, cost do redis.call('ZADD', key, now + window, token .. ':' .. i) end
          redis.call('PEXPIRE', key, reset)
        end
      end
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    break
  end
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      reply[1] = now
    end
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
until true
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply

end)
end
