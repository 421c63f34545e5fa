--[[
  Rate-limit decision for one tracker: every policy of a request, atomically, all-or-nothing.
  The algorithm fragments (ALG[id] = { check, commit, refund, burst }) are spliced in where the marker stands.

  KEYS, per policy, in order:  state key, block key (all share one {hash tag}); n = #KEYS / 2 policies.
  ARGV[1]  mode: 'c' consume | 'p' peek (charges nothing; may drop expired entries) | 'r' refund cost / release lease | 'b' block for ARGV blockFor
  ARGV, per policy (7 each, from ARGV[2]):
    algorithm id, cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token (lease id or '')
  Reply (integers only):
    { now (server ms), all allowed (1|0),
      per policy: allowed (1|0), remaining, reset (ms), retry after (ms, -1 = never), delay (ms), reason }
    reason: 0 counter, 1 blocked (lockout), 2 cost exceeds capacity.
  Time comes from the server's TIME only; nothing is stored but integers.
  This runs on every request, so it is written for Redis's CPU: arguments are parsed once, verdicts are plain
  arrays, and the usual single-policy consume makes no call beyond TIME, the lockout GET and its algorithm's own.
]]
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
local ALG = {}
--@fragments

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode = ARGV[1]
local n = #KEYS / 2

-- Policy i: algorithm, state key, block key, cost, limit, window, burst, blockFor, token.
local function policy(i)
  local a = 2 + (i - 1) * 7
  return ALG[tonumber(ARGV[a])], KEYS[2 * i - 1], KEYS[2 * i], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), ARGV[a + 6]
end

if mode == 'r' or mode == 'b' then
  for i = 1, n do
    local alg, key, bkey, cost, limit, window, burst, blockFor, token = policy(i)
    if mode == 'r' then
      alg.refund(key, cost, limit, window, burst, now, token)
    else
      redis.call('SET', bkey, now + blockFor, 'PX', blockFor)
    end
  end
  return { now }
end

-- Check every policy; reply slots are filled as we go, verdicts kept for the commit.
local reply = { now, 1 }
local verdicts = {}
for i = 1, n do
  local alg, key, bkey, cost, limit, window, burst, blockFor, token = policy(i)
  local b = 3 + (i - 1) * 6
  local until_ = tonumber(redis.call('GET', bkey))
  if until_ and until_ > now then
    reply[2] = 0
    reply[b], reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] = 0, 0, until_ - now, until_ - now, 0, 1
  else
    local r = alg.check(key, cost, limit, window, burst, now, token)
    verdicts[i] = r
    local capacity = limit
    if alg.burst then capacity = burst end
    if r[1] and cost <= capacity then
      reply[b], reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] = 1, r[2], r[3], 0, r[5], 0
    else
      reply[2] = 0
      local reset, retry, reason = r[3], r[4], 0
      if cost > capacity then
        retry, reason = -1, 2
      elseif blockFor > 0 and mode == 'c' then
        redis.call('SET', bkey, now + blockFor, 'PX', blockFor)
        if blockFor > retry then retry = blockFor end
        if blockFor > reset then reset = blockFor end
        reason = 1
      end
      reply[b], reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] = 0, r[2], reset, retry, r[5], reason
    end
  end
end

if mode == 'c' and reply[2] == 1 then
  for i = 1, n do
    local alg, key, _, cost, limit, window, burst, _, token = policy(i)
    alg.commit(key, verdicts[i], now, cost, limit, window, burst, token)
  end
  return reply
end

-- Nothing was charged (a peek, or another policy rejected): a policy that allowed reports its quota as
-- it stands, which is what a check of cost 0 sees.
for i = 1, n do
  local b = 3 + (i - 1) * 6
  if reply[b] == 1 then
    local alg, key, _, _, limit, window, burst, _, token = policy(i)
    local r = alg.check(key, 0, limit, window, burst, now, token)
    reply[b + 1], reply[b + 2], reply[b + 4] = r[2], r[3], 0
  end
end
return reply
