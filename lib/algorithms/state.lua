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

-- Writes `key`'s value, expiring in px ms, or keeping the key's expiry when px is nil (a window's expiry,
-- set once when it moves).
local function putState(key, value, px)
  if px then
    redis.call('SET', key, value, 'PX', px)
  else
    redis.call('SET', key, value, 'KEEPTTL')
  end
end
