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
