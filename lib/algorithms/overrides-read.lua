--[[
  The poll every instance sends every 500 ms: reads the runtime overrides (overrides-write.lua writes them) and
  the deny list (denies-write.lua writes it). Their two versions and the carry-over's marker come in one MGET
  with the server's clock; the overrides only when their version is not the one the caller holds, and of the
  denies only what changed since the caller's sequence number (the whole list when the log no longer reaches
  back that far, or the caller has none), so a poll while nothing changed costs one MGET. The poll is also each
  instance's heartbeat: it records the caller as live now, forgets instances not seen for ARGV[3] ms, and counts
  those left, which is what divides each limit among the instances while Redis is away (the default
  insuranceShare). Its one write is the heartbeat, bounded: one member per instance seen in the last ARGV[3]
  ms, and the key expires ARGV[3] ms after the last poll.

  KEYS  [1] the overrides: a hash of field `<policy>\n<tracker pattern>` to the override's JSON
        [2] the overrides' version (every key here shares KEYS[1]'s {hash tag})
        [3] the live instances: a sorted set of instance ids scored by when each last polled (server ms)
        [4] the denies' sequence number   [5] the denies in force: a hash of field to `<until>[|<reason>]`
        [6] the denies' log: fields scored by their last change's sequence number, and '' by the floor
        [7] the carry-over's marker (see denies-write.lua)
  ARGV  [1] the overrides' version the caller holds ('' for none)
        [2] the caller's instance id ('' for no heartbeat: nothing is written)
        [3] how long an instance counts as live after its last poll, ms
        [4] the denies' sequence number the caller holds ('' for none, '-' for no deny channel: KEYS[4 ..] unused)
  Reply: { overrides' version (0 when none was ever written), now (server ms), live instances (the caller
         included; 0 without a heartbeat), the overrides { field, value, … } or 0 when their version is ARGV[1]
         (ended overrides included: compare their `until` with now), the denies' sequence number (0 when none),
         the carry-over's marker ('' when absent), what changed of the denies: 0 when the sequence number is
         ARGV[4], else { 1 (every deny) or 0 (what changed since ARGV[4]), { field, value, … } } (a value '' is a
         deny lifted; ended denies may be included: compare their `until` with now) }
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
local v = redis.call('MGET', KEYS[2], KEYS[4], KEYS[7])
local version, seq = tonumber(v[1] or '0'), tonumber(v[2] or '0')
local overrides = 0
if version ~= tonumber(ARGV[1]) then overrides = redis.call('HGETALL', KEYS[1]) end
local denies = 0
local known = tonumber(ARGV[4])
if seq ~= known and ARGV[4] ~= '-' then
  local floor = redis.call('ZSCORE', KEYS[6], '')
  if known and floor and known >= tonumber(floor) and known < seq then
    local fields = redis.call('ZRANGE', KEYS[6], '(' .. ARGV[4], '+inf', 'BYSCORE')
    local flat = {}
    -- In slices: unpacking thousands of values would overflow Lua's C stack.
    for i = 1, #fields, 1000 do
      local values = redis.call('HMGET', KEYS[5], (table.unpack or unpack)(fields, i, math.min(i + 999, #fields)))
      for j = 1, #values do
        flat[#flat + 1] = fields[i + j - 1]
        flat[#flat + 1] = values[j] or ''
      end
    end
    denies = { 0, flat }
  else
    denies = { 1, redis.call('HGETALL', KEYS[5]) }
  end
end
return { version, now, live, overrides, seq, v[3] or '', denies }
