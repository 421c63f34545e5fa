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
