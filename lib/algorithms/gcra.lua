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

--@check
ok, remaining, reset, retry, delay, more, s1 = bucket(gcraDebt(key, limit, window, now), cost, limit, window, burst)
--@commit
gcraStore(key, s1, limit, window, now)
--@refund
gcraStore(key, math.max(gcraDebt(key, limit, window, now) - cost * window, 0), limit, window, now)
