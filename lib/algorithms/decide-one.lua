--[[
  Fragment: one decision of one policy with a plain lockout (blockFor a number of ms), the call nearly every
  request makes. Spliced into both dispatchers: lone.lua runs it once for its call; decide.lua runs it for every
  such decision of a batch, and its general path for several policies or an escalating lockout.

  decideOne(reply, o, now, alg, mode, key, bkey, dkey, cost, limit, window, burst, blockFor, token)
    reply, o  the script's reply table, and the first of the six slots this decision writes there
    now       the script's one reading of the server's TIME, ms
    alg       the algorithm's fragment, ALG[id] (check, commit, burst)
    mode      'c' consume or 'p' peek
    key, bkey, dkey  the call's KEYS: state key, lockout key, the tracker's deny key
    cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token: the policy's values of decide.lua's ARGV
  Writes reply[o .. o + 5] = { status, remaining, reset ms, retry after ms (-1 = never), delay ms (a deny's
    reason in its place, 0 without one), more ms }, as one policy of decide.lua's reply; status is a VERDICT_*
    code (lib/stores/verdicts.ts). Raises on someone else's data under a key (the fragment's check does).
  From its host: the VERDICT_* locals and the algorithm fragments; it reads no other variable of the script.
]]
-- The end (server ms) in a lockout or deny key's value, `<until>[:<offences>][|<note>]` (decide.lua); the
-- usual value is a bare number.
local function lockoutEnd(v)
  return tonumber(v) or tonumber(string.match(v, '^%d+'))
end

local function decideOne(reply, o, now, alg, mode, key, bkey, dkey, cost, limit, window, burst, blockFor, token)
  local denial = redis.call('GET', dkey)
  if denial then
    local left = lockoutEnd(denial) - now
    if left > 0 then
      reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_DENIED, 0, left, left, string.match(denial, '|(.*)$') or 0, left
      return
    end
  end
  local v = redis.call('GET', bkey)
  if v then
    local left = lockoutEnd(v) - now
    if left > 0 then
      reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_BLOCKED, 0, left, left, 0, left
      return
    end
  end
  local r = alg.check(key, cost, limit, window, burst, now, token)
  local capacity = limit
  if alg.burst then capacity = burst end
  if r[1] and cost <= capacity then
    if mode == 'c' then
      alg.commit(key, r, now, cost, limit, window, burst, token)
    else
      -- A peek charges nothing: it reports the quota as it stands, what a check of cost 0 sees.
      r = alg.check(key, 0, limit, window, burst, now, token)
      r[5] = 0
    end
    reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = VERDICT_ALLOWED, r[2], r[3], 0, r[5], r.more
    return
  end
  local status, reset, retry, more = VERDICT_LIMITED, r[3], r[4], r.more
  if cost > capacity then
    status, retry = VERDICT_COST_EXCEEDS_CAPACITY, -1
  elseif blockFor > 0 and mode == 'c' then
    -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
    redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
    status, reset, retry, more = VERDICT_BLOCKED, math.max(reset, blockFor), math.max(retry, blockFor), math.max(more, blockFor)
  end
  reply[o], reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5] = status, r[2], reset, retry, r[5], more
end
