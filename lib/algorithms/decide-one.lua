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
local function decideOne(reply, o, now, mode, key, bkey, cost, limit, window, burst, blockFor, token, hold)
  -- mark: whether a lockout may be in force, so the lockout key is read (an algorithm whose state carries no
  -- mark of its lockouts leaves it true).
  local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0, nil, nil, nil, nil, true
  -- A reserve: the counter is checked with the units held back for higher criticalities; only `charge` is taken.
  local charge = cost
  cost = charge + hold
  --@check
  if mark then
    -- A lockout key holds `<until>[:<offences>][|<note>]` (decide.lua); the usual value is a bare number.
    local v = redis.call('GET', bkey)
    if v then
      --@now
      local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
      if left > 0 then
        --@undo
        reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
        return
      end
    end
  end
  --@capacity
  local fits, reserved = ok and cost <= capacity, false
  if cost <= capacity and (hold > 0 or (fits and mode ~= 'c')) then
    -- Checked again without the hold: the state a commit writes (or, refused, whether the reserve alone refuses,
    -- with the wait the held check measured). A peek charges nothing: it reports the quota as it stands, what a
    -- check of cost 0 sees.
    local heldRemaining, heldReset, heldRetry, heldMore = remaining, reset, retry, more
    --@undo
    cost = charge
    if fits and mode ~= 'c' then cost = 0 end
    --@check
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
      --@commit
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, remaining, reset, 0, delay, more
    return
  end
  --@undo
  local status = VERDICT_LIMITED
  if charge + hold > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif reserved then
    status = VERDICT_RESERVED
  elseif blockFor > 0 and mode == 'c' then
    --@now
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    --@lock
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, remaining, reset, retry, delay, more
end
