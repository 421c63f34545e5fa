--[[
  Shared by token-bucket, gcra and leaky-bucket (see bucket.ts): decide a request against a bucket whose
  debt (distance from full, in units × window ms; `limit` of it repaid per ms) is `debt`.
  Returns { allowed, remaining, reset ms, retry ms, delay = 0, debt after }.
]]
local function bucket(debt, cost, limit, window, burst)
  local capacity = burst * window
  local need = cost * window
  if debt + need <= capacity then
    local after = debt + need
    return { true, math.floor((capacity - after) / window), ceildiv(after, limit), 0, 0, after }
  end
  return { false, math.floor((capacity - debt) / window), ceildiv(debt, limit), ceildiv(debt + need - capacity, limit), 0, debt }
end
