#!lua flags=allow-cross-slot-keys
--[[
  Rate-limit decisions, each for one tracker: every policy of a request, atomically, all-or-nothing.
  The algorithm fragments (see the fragment contract below), each with its instance of decide-one.lua (a
  decision of one policy with a plain lockout, the usual one), are spliced in where their marker stands, and the
  VERDICT_* codes (lib/stores/verdicts.ts) where theirs does. One call carries one decision, or several (a
  batch of unrelated decisions made in the same tick on one server, or on one Cluster master): they run one
  after the other, as separate calls would, at one reading of the clock.

  Per decision, in order (n = its policies, at most 8; the TS encoder is DecideCall in redis-codec.ts):
    KEYS  2n: per policy, its state key and its lockout key (all of one decision share one {hash tag}); no
          deny key: each instance answers a denied tracker itself, before any script (lib/pipeline/deny-list.ts)
    ARGV  [1] one JSON array: first the call's distinct policy shapes, each an array of six values, then every
          decision of the call, flat, each 2 + 2n values, so cjson makes one table per shape and one for the
          call (a table per decision, with its mode and token as strings, cost Redis twice as much per decision)
          a shape: [1] algorithm id (ALG index)   [2] cost (units; negative: a concurrency renewal)
                   [3] limit (units per window)  [4] window (ms; a calendar window: its four period starts, ms)
                   [5] burst (units: the capacity of token-bucket, gcra and leaky-bucket; the others ignore it)
                   [6] blockFor (ms, 0 = none; an escalating policy: [ first lockout ms, factor, max ms, forgiveAfter ms ])
                   [7] hold (units the decision must leave untaken, a `reserve` for higher criticalities), left
                       out when 0: the counter is checked with cost + hold and charged cost
          a decision: +0 mode: 1 consume | 2 peek (charges nothing; may drop expired entries) | 3 refund cost
             (units) / release the lease | 4 block for blockFor, never shortening a lockout in force, the token
             kept as its note (deny() writes the 1.0 deny key so) | 5 penalty: charge cost whatever the
             counter says (the refund with cost negated), then peek one unit
          +1 n
          then per policy i (from +2 + 2(i − 1)): +0 its shape's index, +1 its token (lease id, a settlement's
          charge time in ms, a block's note, as a string), or 0 for none
  A lockout or deny key holds `<until>[:<offences>][|<note>]`: the end (server ms), an escalating policy's
  lockouts since it was last forgiven (the key then outlives the lockout by forgiveAfter), a deny's reason
  (the deny key that deny() still writes for 1.0 instances, which no decision here reads).
  Reply (integers):
    { now (server ms),
      per consume/peek/penalty decision, per policy, six slots: status, remaining (units), reset (ms),
        retry after (ms, -1 = never), delay (ms), more (ms until additional quota: `remaining` grows by one; 0
        when nothing is used; a lockout's end at the soonest) }
    status, a VERDICT_* code: VERDICT_ALLOWED; rejected: VERDICT_LIMITED by the counter, VERDICT_BLOCKED by a
    lockout, VERDICT_COST_EXCEEDS_CAPACITY (retry -1; with a hold, cost + hold above the capacity),
    VERDICT_RESERVED (the cost fits the counter, but not with the hold: no lockout starts, and the waits are
    the held check's). With a hold, remaining leaves the held units out. (VERDICT_DENIED and
    VERDICT_STORE_UNAVAILABLE are TypeScript's: a deny is answered before the store is asked, a fallback's
    verdict instead of a reply.)
    A fragment's check returns its `more` as the field r.more; a commit may re-measure it (a concurrency renewal).
    Refund and block decisions add nothing. A decision that failed has its error message (a string) in
    its first status slot, and zeros.
  Time comes from the server's TIME only; nothing is stored but integers and a deny's reason.

  Across slots (a Cluster's batch per master: redis-scripts.ts composes it): the script starts with
  `#!lua flags=allow-cross-slot-keys` and declares no key when sent on the master's own connection (ioredis), or
  one, the first decision's state key, which routes the call to its master; every key above comes after the
  JSON instead, as ARGV[2 ..], in the same order. A key that
  master does not hold fails its decision alone ("Script attempted to access a non local key") at the decision's
  first access to it, before anything was charged: Redis refuses that access before the command runs.

  The fragment contract (each algorithm's .lua file; redis-scripts.ts splices the fragments into this script
  and one-policy.lua): local helpers, then blocks of statements, each after its marker line (two dashes, @ and
  its name): check, commit, then, for an algorithm whose check charges at once, undo and lock, then refund. A
  fragment reads nothing of its host but ceildiv and the helpers of state.lua and bucket.lua; it decides on one
  policy's values, as these names: key (its state key), cost (units), limit, window (ms), burst, now (the
  script's server ms; nil in a one-policy call of an algorithm whose check reads the clock itself, under the
  now marker), token.
    check  reads the state (may drop expired entries or rewrite a state measured with other params) and sets, on
           every path: ok (allowed), remaining, reset (ms), retry (ms), delay (ms), more (ms until additional
           quota); s1 .. s4, the algorithm's own values for its commit; and mark, false when its state says no
           lockout can be in force (the host then reads no lockout key; left true, it always does). It
           charges nothing, unless the fragment has an undo block: then it charges at once (one command)
    commit charges what the check allowed; reads the check's reset, more and s1 .. s4, and may set more
    undo   takes back what a check charged, when the decision does not commit (from s1 .. s4)
    lock   after a lockout of the policy was written: marks the state, so its next check sets mark
    refund gives cost units back (a negative cost charges them); may return early
  A block declares only its own locals: the names above are its host's. The blocks are written into decide-one.lua
  once per algorithm (no closure per block: a one-policy call builds none), and into ALG[id] = { check, commit,
  undo, lock, refund, burst } for the general path here, which hands a check's values on as r = { ok, remaining,
  reset, retry, delay, s1, s2, s3, s4, more = more }. burst: true when the capacity is burst rather than limit.
]]
local KEYS = {}
for i = 2, #ARGV do KEYS[i - 1] = ARGV[i] end
local VERDICT_ALLOWED = 0
local VERDICT_LIMITED = 1
local VERDICT_BLOCKED = 2
local VERDICT_COST_EXCEEDS_CAPACITY = 3
local VERDICT_STORE_UNAVAILABLE = 4
local VERDICT_DENIED = 5
local VERDICT_RESERVED = 6
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
local ALG = {}
-- One policy, plain lockout: decide-one.lua's function for each algorithm, by id.
local DECIDE_ONE = {}
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


ALG[1] = {
  burst = false,
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
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
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
    do
      if s2 == 1 then redis.call('INCRBY', key, FIXED_WINDOW_UNMARK) end
    end
    r.more = more
  end,
  undo = function(key, r)
    do
      local s1, s2, s3, s4 = r[6], r[7], r[8], r[9]
      if s1 > 0 then
        if s3 and s2 == 0 then redis.call('DEL', key) else redis.call('DECRBY', key, s1) end
      end
    end
  end,
  lock = function(key)
    do
      local v = redis.call('GET', key)
      if v and fixedWindowCount(key, v) < FIXED_WINDOW_MARKED then redis.call('INCRBY', key, FIXED_WINDOW_MARK) end
    end
  end,
  refund = function(key, cost, limit, window, burst, now, token)
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
  end,
}
DECIDE_ONE[1] = function(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
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
        return
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
    return
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
end

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


ALG[2] = {
  burst = false,
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
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
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
    do
      if reset ~= 0 then slidingStore(key, s1, s2, s3, s4 and reset or nil) end
    end
    r.more = more
  end,
  undo = function(key, r)

  end,
  lock = function(key)

  end,
  refund = function(key, cost, limit, window, burst, now, token)
    local id, cur, prev = slidingCounts(key, window, now)
    -- A settlement's token is when its units were charged: from an earlier window they come back from the
    -- previous window's count while it still weighs, and from older ones not at all.
    local at = tonumber(token)
    if cost >= 0 and at and math.floor(at / window) < id then
      if math.floor(at / window) ~= id - 1 or prev == 0 then return end
      local p = math.max(prev - cost, 0)
      if cur == 0 and p == 0 then redis.call('DEL', key) return end
      slidingStore(key, id, cur, p, slidingReset(id, cur, p, window, now))
      return
    end
    if cur == 0 and cost >= 0 then return end
    local c = math.max(cur - cost, 0)
    -- A negative cost (a penalty) may open the current window's count: the key must then outlive it.
    slidingStore(key, id, c, prev, cur == 0 and slidingReset(id, c, prev, window, now) or nil)
  end,
}
DECIDE_ONE[2] = function(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
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
        return
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
    return
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
end

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

ALG[3] = {
  burst = false,
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
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
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
    do
      if cost ~= 0 then slidingLogAdd(key, now, cost, window) end
    end
    r.more = more
  end,
  undo = function(key, r)

  end,
  lock = function(key)

  end,
  refund = function(key, cost, limit, window, burst, now, token)
    -- A negative cost is a penalty (or an overdraft): log that many units now, as an admitted request would,
    -- up to twice the limit (one entry per unit: penalties without end would be memory without end).
    if cost < 0 then
      local add = math.min(-cost, math.max(2 * limit - slidingLogTrim(key, window, now), 0))
      if add > 0 then slidingLogAdd(key, now, add, window) end
      return
    end
    -- cost 0 gives nothing back (and -0 would reach Redis as the invalid rank '-0').
    if cost <= 0 or slidingLogTrim(key, window, now) == 0 then return end
    local at = tonumber(token)
    if at then
      -- A settlement's token is when its units were logged: remove entries of that millisecond only (they
      -- hold the ranks just below the first later entry, highest members last), none once they aged out.
      local last = redis.call('ZCOUNT', key, '-inf', at) - 1
      local k = math.min(redis.call('ZCOUNT', key, at, at), cost)
      if k > 0 then redis.call('ZREMRANGEBYRANK', key, last - k + 1, last) end
      return
    end
    redis.call('ZREMRANGEBYRANK', key, -cost, -1)
  end,
}
DECIDE_ONE[3] = function(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
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
        return
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
    return
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
end

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


ALG[4] = {
  burst = true,
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
    do
      local debt, at = tokenBucketDebt(key, limit, window, burst, now)
      ok, remaining, reset, retry, delay, more, s1 = bucket(debt, cost, limit, window, burst)
      s2 = at
    end
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
    do
      tokenBucketStore(key, s1, s2, limit, window, burst)
    end
    r.more = more
  end,
  undo = function(key, r)

  end,
  lock = function(key)

  end,
  refund = function(key, cost, limit, window, burst, now, token)
    local debt, at = tokenBucketDebt(key, limit, window, burst, now)
    tokenBucketStore(key, math.max(debt - cost * window, 0), at, limit, window, burst)
  end,
}
DECIDE_ONE[4] = function(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
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
        return
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
    return
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
end

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


ALG[5] = {
  burst = true,
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
    do
      ok, remaining, reset, retry, delay, more, s1 = bucket(gcraDebt(key, limit, window, now), cost, limit, window, burst)
    end
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
    do
      gcraStore(key, s1, limit, window, now)
    end
    r.more = more
  end,
  undo = function(key, r)

  end,
  lock = function(key)

  end,
  refund = function(key, cost, limit, window, burst, now, token)
    gcraStore(key, math.max(gcraDebt(key, limit, window, now) - cost * window, 0), limit, window, now)
  end,
}
DECIDE_ONE[5] = function(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
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
        return
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
    return
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
end

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


ALG[6] = {
  burst = true,
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
    do
      local level, at = leakyLevel(key, limit, window, now)
      ok, remaining, reset, retry, delay, more, s1 = bucket(level, cost, limit, window, burst)
      if ok then delay = ceildiv(level, limit) end
      s2 = at
    end
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
    do
      leakyStore(key, s1, s2, limit, window)
    end
    r.more = more
  end,
  undo = function(key, r)

  end,
  lock = function(key)

  end,
  refund = function(key, cost, limit, window, burst, now, token)
    local level, at = leakyLevel(key, limit, window, now)
    leakyStore(key, math.max(level - cost * window, 0), at, limit, window)
  end,
}
DECIDE_ONE[6] = function(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
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
        return
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
    return
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
end

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

ALG[7] = {
  burst = false,
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
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
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
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
    r.more = more
  end,
  undo = function(key, r)

  end,
  lock = function(key)

  end,
  refund = function(key, cost, limit, window, burst, now, token)
    for i = 1, cost do
      if redis.call('ZREM', key, token .. ':' .. i) == 0 then break end
    end
  end,
}
DECIDE_ONE[7] = function(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
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
        return
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
    return
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
end


-- Values per policy in the argument array, after a decision's mode and n (see the header).
local PER_POLICY = 2
local MODES = { 'c', 'p', 'r', 'b', 'x' }

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reply = { now }
local A = cjson.decode(ARGV[1])
local SHAPES = A[1]

-- Policy i of the decision at A[d] whose keys start at KEYS[k], as ten values (no table: this runs for every
-- policy of every decision): algorithm, state key, block key, cost, limit, window, burst, blockFor, token, hold.
local function policy(k, d, i)
  local p = d + 2 + (i - 1) * PER_POLICY
  local s = SHAPES[A[p]]
  local token = A[p + 1]
  if token == 0 then token = '' end
  return ALG[s[1]], KEYS[k + 2 * i - 2], KEYS[k + 2 * i - 1], s[2], s[3], s[4], s[5], s[6], token, s[7] or 0
end

-- A lockout key's value as its end, offence count (0 without) and note (0 without): see the header.
-- A plain lockout, the usual value, is a number and parses at once.
local function lockout(v)
  local until_ = tonumber(v)
  if until_ then return until_, 0, 0 end
  local note = 0
  local bar = string.find(v, '|', 1, true)
  if bar then v, note = string.sub(v, 1, bar - 1), string.sub(v, bar + 1) end
  local colon = string.find(v, ':', 1, true)
  if colon then return tonumber(string.sub(v, 1, colon - 1)), tonumber(string.sub(v, colon + 1)), note end
  return tonumber(v), 0, note
end

-- The lockout a rejection starts, given the block key's value v: its length, the value to store and its PX.
-- An escalating policy's n-th lockout since it was last forgiven lasts min(first × factor^(n-1), max), and its
-- key outlives it by forgiveAfter to remember n; offences whose quiet time has passed are forgotten.
local function lockoutFor(blockFor, v)
  if type(blockFor) == 'number' then return blockFor, now + blockFor, blockFor end
  local len, factor, max, forgive = blockFor[1], blockFor[2], blockFor[3], blockFor[4]
  local offences = 0
  if v then
    local until_, count = lockout(v)
    if now < until_ + forgive then offences = count end
  end
  -- At most ~42 steps: the cap is at most 2^42 times the first lockout.
  for _ = 1, offences do
    len = len * factor
    if len >= max then
      len = max
      break
    end
  end
  return len, string.format('%d:%d', now + len, offences + 1), len + forgive
end

-- block(): a lockout of blockFor from now, unless one in force ends as late or later (never shortened). An
-- escalating policy keeps its unforgiven offence count (and its key the forgiveness time); a note is kept with it.
local function extendLockout(bkey, blockFor, note)
  local len, forgive = blockFor, 0
  if type(blockFor) == 'table' then len, forgive = blockFor[1], blockFor[4] end
  local until_, px, offences = now + len, len, 0
  local v = redis.call('GET', bkey)
  if v then
    local before, count = lockout(v)
    if before >= until_ then return end
    if forgive > 0 and now < before + forgive then offences = count end
  end
  -- %d, not concatenation: Lua 5.4 (Dragonfly) would print a number cjson gave as a float with '.0'.
  local value = string.format('%d', until_)
  if offences > 0 then value, px = value .. string.format(':%d', offences), len + forgive end
  if note ~= '' then value = value .. '|' .. note end
  redis.call('SET', bkey, value, 'PX', px)
end

local function change(mode, n, k, d)
  for i = 1, n do
    local alg, key, bkey, cost, limit, window, burst, blockFor, token = policy(k, d, i)
    if mode == 'r' then
      alg.refund(key, cost, limit, window, burst, now, token)
    else
      extendLockout(bkey, blockFor, token)
      alg.lock(key)
    end
  end
end

-- Decides into the six reply slots per policy from reply[o]; with `unit`, each policy checks that many units
-- instead of its cost (a penalty's peek).
local function decide(mode, n, k, d, o, unit)
  -- Check every policy; reply slots are filled as we go, verdicts kept for the commit.
  local allowed = true
  local verdicts = {}
  for i = 1, n do
    local alg, key, bkey, cost, limit, window, burst, blockFor, token, hold = policy(k, d, i)
    if unit then cost = unit end
    local b = o + (i - 1) * 6
    local v = redis.call('GET', bkey)
    local until_ = v and lockout(v)
    if until_ and until_ > now then
      allowed = false
      reply[b], reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] = VERDICT_BLOCKED, 0, until_ - now, until_ - now, 0, until_ - now
    else
      -- A reserve: checked with the units held back for higher criticalities (see decide-one.lua).
      local r = alg.check(key, cost + hold, limit, window, burst, now, token)
      local capacity = limit
      if alg.burst then capacity = burst end
      local fits, reserved, undone = r[1] and cost + hold <= capacity, false, false
      if hold > 0 then
        if cost + hold <= capacity then
          -- Again without the hold: what a commit takes, or, refused, whether the reserve alone refuses (a check
          -- that charges at once takes the held one back first, and a refused one at once).
          alg.undo(key, r)
          local plain = alg.check(key, cost, limit, window, burst, now, token)
          if fits then
            r = plain
          else
            reserved, undone = plain[1], true
            alg.undo(key, plain)
          end
        end
        r[2] = math.max(r[2] - hold, 0)
      end
      if not undone then verdicts[i] = r end
      if fits then
        reply[b], reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] = VERDICT_ALLOWED, r[2], r[3], 0, r[5], r.more
      else
        allowed = false
        local status, reset, retry, more = VERDICT_LIMITED, r[3], r[4], r.more
        if cost + hold > capacity then
          status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
        elseif reserved then
          status = VERDICT_RESERVED
        elseif blockFor ~= 0 and mode == 'c' then
          local len, value, px = lockoutFor(blockFor, v)
          redis.call('SET', bkey, value, 'PX', px)
          alg.lock(key)
          if len > retry then retry = len end
          if len > reset then reset = len end
          if len > more then more = len end
          status = VERDICT_BLOCKED
        end
        reply[b], reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] = status, r[2], reset, retry, r[5], more
      end
    end
  end

  if mode == 'c' and allowed then
    for i = 1, n do
      local alg, key, _, cost, limit, window, burst, _, token = policy(k, d, i)
      alg.commit(key, verdicts[i], now, cost, limit, window, burst, token)
      reply[o + (i - 1) * 6 + 5] = verdicts[i].more
    end
    return
  end
  -- Nothing is charged: what a check charged at once is taken back.
  for i = 1, n do
    if verdicts[i] then
      local alg, key = policy(k, d, i)
      alg.undo(key, verdicts[i])
    end
  end

  -- Nothing was charged (a peek, or another policy rejected): a policy that allowed reports its quota as
  -- it stands, which is what a check of cost 0 sees.
  for i = 1, n do
    local b = o + (i - 1) * 6
    if reply[b] == VERDICT_ALLOWED then
      local alg, key, _, _, limit, window, burst, _, token, hold = policy(k, d, i)
      local r = alg.check(key, 0, limit, window, burst, now, token)
      local remaining = r[2]
      if hold > 0 then remaining = math.max(remaining - hold, 0) end
      reply[b + 1], reply[b + 2], reply[b + 4], reply[b + 5] = remaining, r[3], 0, r.more
    end
  end
end

-- A penalty charges every policy unconditionally (a refund of minus the cost), then reports what a peek of
-- one unit sees: whether one more unit fits, and when it will.
local function penalize(mode, n, k, d, o)
  for i = 1, n do
    local alg, key, _, cost, limit, window, burst, _, token = policy(k, d, i)
    alg.refund(key, -cost, limit, window, burst, now, token)
  end
  decide('p', n, k, d, o, 1)
end

local k, d = 1, 2
while A[d] do
  local mode, n = MODES[A[d]], A[d + 1]
  if mode == 'r' or mode == 'b' then
    change(mode, n, k, d)
  else
    local o = #reply + 1
    local ok, err
    if mode == 'x' then
      ok, err = pcall(penalize, mode, n, k, d, o)
    elseif n == 1 and type(SHAPES[A[d + 2]][6]) == 'number' then
      -- One policy with a plain lockout (its shape's blockFor, a number): the lean path (decide-one.lua), as a
      -- one-policy call takes it.
      local s = SHAPES[A[d + 2]]
      local token = A[d + 3]
      if token == 0 then token = '' end
      ok, err = pcall(DECIDE_ONE[s[1]], reply, o, now, mode, KEYS[k], KEYS[k + 1], s[2], s[3], s[4], s[5], s[6], token, s[7] or 0)
    else
      ok, err = pcall(decide, mode, n, k, d, o)
    end
    if not ok then
      -- A decision that fails (a key holding someone else's data) fails alone, before it charged anything
      -- (errors come from reading state): its message takes its first slot, the others go on.
      if type(err) == 'table' then err = err.err end
      reply[o] = tostring(err)
      for x = o + 1, o + 6 * n - 1 do reply[x] = 0 end
    end
  end
  k = k + 2 * n
  d = d + 2 + PER_POLICY * n
end
return reply
