--[[
  Reads the runtime overrides (writeOverride-3.lua writes them), polled by every instance every 500 ms: their
  version and the server's clock, and every override only when the version is not the one the caller holds,
  so an unchanged set costs one GET. Reads only.

  KEYS  [1] the overrides: a hash of field `<policy>\n<tracker pattern>` to the override's JSON
        [2] the set's version (one {hash tag} with KEYS[1])
  ARGV  [1] the version the caller holds ('' for none)
  Reply: { version (0 when none was ever written), now (server ms) } when it is ARGV[1]; else
         { version, now, { field, value, field, value, … } } (ended overrides included: compare their `until`
         with now).
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local version = tonumber(redis.call('GET', KEYS[2]) or '0')
if version == tonumber(ARGV[1]) then return { version, now } end
return { version, now, redis.call('HGETALL', KEYS[1]) }
