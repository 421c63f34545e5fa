--[[
  One decision of one policy: the call every quiet API and every Cluster node makes, kept as lean as the
  general dispatcher (decide.lua) allows. The one algorithm's fragment is spliced in where the marker stands;
  it decides exactly as it does there.
    KEYS  state key, lockout key, the tracker's deny key (one {hash tag})
    ARGV  mode ('c' consume | 'p' peek), cost, limit, window (ms), burst, blockFor (ms, 0 = none), token
          (plain arguments, no JSON: a calendar window or an escalating lockout goes to decide.lua)
  Reply: { now, status, remaining, reset, retry after, delay (a deny's reason), more }, one decision of
  decide.lua's reply, with its statuses. An error (a key holding someone else's data) fails the call.
]]
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
local ALG = {}
--@fragments

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key, bkey = KEYS[1], KEYS[2]
local mode, cost, limit, window, burst, blockFor, token =
  ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local _, alg = next(ALG)

-- A denied tracker, then a lockout in force. Either key holds `<until>[:<offences>][|<note>]` (decide.lua);
-- the usual value is a bare number.
local denial = redis.call('GET', KEYS[3])
if denial then
  local left = (tonumber(denial) or tonumber(string.match(denial, '^%d+'))) - now
  if left > 0 then return { now, 5, 0, left, left, string.match(denial, '|(.*)$') or 0, left } end
end
local v = redis.call('GET', bkey)
if v then
  local left = (tonumber(v) or tonumber(string.match(v, '^%d+'))) - now
  if left > 0 then return { now, 2, 0, left, left, 0, left } end
end

local r = alg.check(key, cost, limit, window, burst, now, token)
local capacity = limit
if alg.burst then capacity = burst end
if r[1] and cost <= capacity then
  if mode == 'c' then
    alg.commit(key, r, now, cost, limit, window, burst, token)
    return { now, 0, r[2], r[3], 0, r[5], r.more }
  end
  -- A peek charges nothing: it reports the quota as it stands, what a check of cost 0 sees.
  local q = alg.check(key, 0, limit, window, burst, now, token)
  return { now, 0, q[2], q[3], 0, 0, q.more }
end
if cost > capacity then return { now, 3, r[2], r[3], -1, r[5], r.more } end
local reset, retry, more = r[3], r[4], r.more
if blockFor > 0 and mode == 'c' then
  -- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
  redis.call('SET', bkey, string.format('%d', now + blockFor), 'PX', blockFor)
  retry, reset, more = math.max(retry, blockFor), math.max(reset, blockFor), math.max(more, blockFor)
  return { now, 2, r[2], reset, retry, r[5], more }
end
return { now, 1, r[2], reset, retry, r[5], more }
