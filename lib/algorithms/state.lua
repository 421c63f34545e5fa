--[[
  State kept in a string key: whole numbers joined by ':' (fixed-window, sliding-window and the buckets).
  Redis reads and writes one string faster than a small hash (one GET, one SET … PX) and keeps it in fewer bytes.
]]
-- The captures of `pattern` in `key`'s value v; a value that does not match is someone else's data under
-- our prefix, and fails the decision naming the key.
local function stateFields(key, v, pattern)
  local a, b, c, d = string.match(v, pattern)
  if not a then
    error({ err = string.format('Redis key "%s" holds "%s", which the rate limiter did not write: another application'
      .. ' writes under this prefix. Give the rate limiter its own \'prefix\' or delete the key.', key, string.sub(v, 1, 40)) })
  end
  return a, b, c, d
end
