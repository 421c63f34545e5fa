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
