--[[
  Rate-limit decision for one tracker: every policy of a request, atomically, all-or-nothing.
  The algorithm fragments (ALG[id] = { check, commit, refund, burst }) are spliced in where the marker stands.

  KEYS, per policy, in order:  state key, block key (all share one {hash tag}).
  ARGV[1]  mode: 'c' consume | 'p' peek (charges nothing; may drop expired entries) | 'r' refund cost / release lease | 'b' block for ARGV blockFor
  ARGV[2]  number of policies n
  ARGV, per policy (7 each, from ARGV[3]):
    algorithm id, cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token (lease id or '')
  Reply (integers only):
    { now (server ms), all allowed (1|0),
      per policy: allowed (1|0), remaining, reset (ms), retry after (ms, -1 = never), delay (ms), reason }
    reason: 0 counter, 1 blocked (lockout), 2 cost exceeds capacity.
  Time comes from the server's TIME only; nothing is stored but integers.
]]
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
local ALG = {}
--@fragments

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode = ARGV[1]
local n = tonumber(ARGV[2])

local function policy(i)
  local a = 3 + (i - 1) * 7
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

local reply = { now, 1 }
local verdicts = {}
for i = 1, n do
  local alg, key, bkey, cost, limit, window, burst, blockFor, token = policy(i)
  local r
  local until_ = tonumber(redis.call('GET', bkey))
  if until_ and until_ > now then
    r = { false, 0, until_ - now, until_ - now, 0, reason = 1 }
  else
    r = alg.check(key, cost, limit, window, burst, now, token)
    r.reason = 0
    local capacity = limit
    if alg.burst then capacity = burst end
    if cost > capacity then
      r[1] = false
      r[4] = -1
      r.reason = 2
    elseif not r[1] and blockFor > 0 and mode == 'c' then
      redis.call('SET', bkey, now + blockFor, 'PX', blockFor)
      if blockFor > r[4] then r[4] = blockFor end
      if blockFor > r[3] then r[3] = blockFor end
      r.reason = 1
    end
  end
  verdicts[i] = r
  if not r[1] then reply[2] = 0 end
  local allowed = 0
  if r[1] then allowed = 1 end
  local b = 3 + (i - 1) * 6
  reply[b], reply[b + 1], reply[b + 2], reply[b + 3], reply[b + 4], reply[b + 5] = allowed, r[2], r[3], r[4], r[5], r.reason
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
