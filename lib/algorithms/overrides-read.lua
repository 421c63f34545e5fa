--[[
  Reads the runtime overrides (overrides-write.lua writes them), polled by every instance every 500 ms: their
  version and the server's clock, and every override only when the version is not the one the caller holds,
  so an unchanged set costs one GET. The poll is also each instance's heartbeat: it records the caller as live
  now, forgets instances not seen for ARGV[3] ms, and counts those left, which is what divides each limit among
  the instances while Redis is away (the default insuranceShare). Its one write is the heartbeat, bounded: one
  member per instance seen in the last ARGV[3] ms, and the key expires ARGV[3] ms after the last poll.

  KEYS  [1] the overrides: a hash of field `<policy>\n<tracker pattern>` to the override's JSON
        [2] the set's version (one {hash tag} with KEYS[1] and KEYS[3])
        [3] the live instances: a sorted set of instance ids scored by when each last polled (server ms)
  ARGV  [1] the version the caller holds ('' for none)
        [2] the caller's instance id ('' for no heartbeat: nothing is written)
        [3] how long an instance counts as live after its last poll, ms
  Reply: { version (0 when none was ever written), now (server ms), live instances (the caller included; 0
         without a heartbeat) } when the version is ARGV[1]; else { version, now, live instances, { field,
         value, field, value, … } } (ended overrides included: compare their `until` with now).
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = 0
if ARGV[2] ~= '' then
  local liveMs = tonumber(ARGV[3])
  redis.call('ZADD', KEYS[3], now, ARGV[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - liveMs)
  redis.call('PEXPIRE', KEYS[3], liveMs)
  live = redis.call('ZCARD', KEYS[3])
end
local version = tonumber(redis.call('GET', KEYS[2]) or '0')
if version == tonumber(ARGV[1]) then return { version, now, live } end
return { version, now, live, redis.call('HGETALL', KEYS[1]) }
