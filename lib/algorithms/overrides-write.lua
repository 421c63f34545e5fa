--[[
  Sets or removes one runtime override (RateLimitAdmin.setOverride / removeOverride), atomically: drops the
  overrides whose end has passed, then writes, then moves the set's version on, so every instance polling
  overrides-read.lua reloads the set within one poll. The three keys share one {hash tag}: one Cluster slot.
  These keys have no TTL by design: an override lasts until it is removed or its end passes.

  KEYS  [1] the overrides: a hash of field `<policy>\n<tracker pattern>` to the override's JSON
        [2] the set's version: an integer, moved on by every write
        [3] each override's end: a sorted set of fields scored by `until` (server ms)
  ARGV  [1] field   [2] the override's JSON, '' to remove the field
        [3] until (server ms, 0 = never)   [4] most overrides kept (a new field beyond it is refused)
  Reply: { version, now (server ms), status }: status 0 written, 1 refused because `until` is not after now,
         2 refused because the set is full; nothing is written (nor the version moved) when refused.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local ended = redis.call('ZRANGE', KEYS[3], '-inf', now, 'BYSCORE')
-- In slices: unpacking thousands of values would overflow Lua's C stack. (unpack is Lua 5.1's, table.unpack 5.4's.)
for i = 1, #ended, 1000 do
  redis.call('HDEL', KEYS[1], (table.unpack or unpack)(ended, i, math.min(i + 999, #ended)))
end
if #ended > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now) end

local field, value, ends = ARGV[1], ARGV[2], tonumber(ARGV[3])
local status = 0
if value == '' then
  redis.call('HDEL', KEYS[1], field)
  redis.call('ZREM', KEYS[3], field)
elseif ends > 0 and ends <= now then
  status = 1
elseif redis.call('HEXISTS', KEYS[1], field) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  status = 2
else
  redis.call('HSET', KEYS[1], field, value)
  if ends > 0 then redis.call('ZADD', KEYS[3], ends, field) else redis.call('ZREM', KEYS[3], field) end
end

local version = tonumber(redis.call('GET', KEYS[2]) or '0')
if status == 0 then
  version = redis.call('INCR', KEYS[2])
  -- A version key that was lost (a flush) starts again from the clock, not from 1: an instance still holding
  -- an old version must not take a new set for the one it has.
  if version == 1 then
    version = now
    redis.call('SET', KEYS[2], now)
  end
end
return { version, now, status }
