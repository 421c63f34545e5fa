--[[
  Writes the deny list's channel (RateLimitAdmin.deny / allow, and the carry-over of 1.0 deny keys), atomically:
  drops the denies whose end has passed, makes the change, logs each tracker it changed under one new sequence
  number, and moves the sequence on, so every instance polling overrides-read.lua reads only what changed
  within one poll. Every key shares the overrides' {hash tag}: one Cluster slot. Bounded: at most ARGV[2]
  denies in force and ARGV[3] log entries; every key lives as long as the last deny's end, and at least ARGV[4]
  ms after the last write (a poll that finds the log gone reads every deny again).

  KEYS  [1] the sequence: an integer, moved on by every write that changed something
        [2] the denies in force: a hash of field (the tracker's 1.0 deny key, `<prefix>:{<tracker>}:deny`) to
            `<until>[|<reason>]`, until in server ms (the 1.0 deny key's own value)
        [3] the log: a sorted set of fields scored by the sequence number of their last change, and the member
            '' scored by the highest sequence number no longer logged (a poll that knows less reads it all)
        [4] each deny's end: a sorted set of fields scored by until (server ms)
        [5] the carry-over's marker: absent (due), 'done', or another value while one is not due (with a TTL)
        [6] the live instances (overrides-read.lua's heartbeat): a sorted set of ids scored by their last poll
  ARGV  [1] what to do: 'deny', 'allow', 'import', 'import-begin' or 'import-end'
        [2] most denies in force (a new tracker beyond it is refused)   [3] most log entries kept
        [4] how long the keys live after a write at least, ms
        deny:   [5] field  [6] length ms from now (0: [7] gives the end)  [7] until, server ms  [8] reason ('' none)
                (never shortens: a deny in force that ends as late or later is kept, with its reason)
        allow:  [5] field
        import: [5] the sequence number the carry-over began at; then pairs from [6]: field, a 1.0 deny key's
                value `<until>[|<reason>]` (never shortens; a tracker denied or allowed since [5] is left alone)
        import-begin: [5] ms before another carry-over may begin   [6] how long an instance counts as live, ms
        import-end:   [5] 'done' (no 1.0 instance was live when it began: none is due again) or ''
  Reply: { sequence, now (server ms), status, a, b }
         deny: status 0 in force (a = until, b = reason or ''), 1 until is not after now, 2 refused (full)
         allow: status 0      import: status 0, a = denies carried over, b = refused (full)
         import-begin: status 0 begin (a = 1.0 instances live), 1 done already, 2 another began lately
         import-end: status 0
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local unpack_ = table.unpack or unpack
local op, maxDenies, maxLog, keepMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')

-- Denies that ended go without a log entry: every instance drops a deny at its end by itself.
local ended = redis.call('ZRANGE', KEYS[4], '-inf', now, 'BYSCORE')
-- In slices: unpacking thousands of values would overflow Lua's C stack.
for i = 1, #ended, 1000 do
  redis.call('HDEL', KEYS[2], unpack_(ended, i, math.min(i + 999, #ended)))
end
if #ended > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now) end

local changed = {}

local function endOf(value)
  return tonumber(string.match(value, '^%d+'))
end

-- %d: Lua 5.4 (Dragonfly) would print a float's '.0'.
local function put(field, until_, reason)
  local value = string.format('%d', until_)
  if reason ~= '' then value = value .. '|' .. reason end
  redis.call('HSET', KEYS[2], field, value)
  redis.call('ZADD', KEYS[4], until_, field)
  changed[#changed + 1] = field
end

-- Whether a deny of field until until_ may be written: none in force ends as late, and there is room.
local function fits(field, until_)
  local before = redis.call('HGET', KEYS[2], field)
  if before then return endOf(before) < until_, before end
  return redis.call('HLEN', KEYS[2]) < maxDenies, nil
end

-- Logs what changed under one new sequence number, keeps the log bounded, and sets every key's TTL.
local function commit()
  if #changed == 0 then return end
  seq = redis.call('INCR', KEYS[1])
  -- A sequence that was lost (expired with the log, or a flush) starts again from the clock, not from 1: an
  -- instance still holding an old number then finds the log's floor above it and reads every deny.
  if seq == 1 then
    seq = now
    redis.call('SET', KEYS[1], now)
  end
  if not redis.call('ZSCORE', KEYS[3], '') then redis.call('ZADD', KEYS[3], seq - 1, '') end
  for i = 1, #changed do redis.call('ZADD', KEYS[3], seq, changed[i]) end
  local logged = redis.call('ZCARD', KEYS[3]) - 1
  if logged > maxLog then
    -- The oldest entries go, and the floor ('') rises to the last of them: rank 0 is the floor itself.
    local r = logged - maxLog
    local last = redis.call('ZRANGE', KEYS[3], r, r, 'WITHSCORES')
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, r)
    redis.call('ZADD', KEYS[3], last[2], '')
  end
  local ttl = keepMs
  local latest = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2]
  if latest and tonumber(latest) - now > ttl then ttl = tonumber(latest) - now end
  for k = 1, 4 do redis.call('PEXPIRE', KEYS[k], ttl) end
end

if op == 'deny' then
  local field, until_, reason = ARGV[5], tonumber(ARGV[7]), ARGV[8]
  if tonumber(ARGV[6]) > 0 then until_ = now + tonumber(ARGV[6]) end
  if until_ <= now then return { seq, now, 1, 0, '' } end
  local ok, before = fits(field, until_)
  if ok then
    put(field, until_, reason)
  elseif not before then
    return { seq, now, 2, 0, '' }
  else
    until_, reason = endOf(before), string.match(before, '|(.*)$') or ''
  end
  commit()
  return { seq, now, 0, until_, reason }
elseif op == 'allow' then
  if redis.call('HDEL', KEYS[2], ARGV[5]) == 1 then redis.call('ZREM', KEYS[4], ARGV[5]) end
  -- Logged even when nothing was held: an instance may hold a deny carried over from its own write.
  changed[1] = ARGV[5]
  commit()
  return { seq, now, 0, 0, '' }
elseif op == 'import' then
  local since, imported, refused = tonumber(ARGV[5]), 0, 0
  for i = 6, #ARGV - 1, 2 do
    local field, value = ARGV[i], ARGV[i + 1]
    local until_ = endOf(value)
    local logged = redis.call('ZSCORE', KEYS[3], field)
    if until_ and until_ > now and not (logged and tonumber(logged) > since) then
      local ok, before = fits(field, until_)
      if ok then
        put(field, until_, string.match(value, '|(.*)$') or '')
        imported = imported + 1
      elseif not before then
        refused = refused + 1
      end
    end
  end
  commit()
  return { seq, now, 0, imported, refused }
elseif op == 'import-begin' then
  local marker = redis.call('GET', KEYS[5])
  if marker == 'done' then return { seq, now, 1, 0, '' } end
  if marker then return { seq, now, 2, 0, '' } end
  redis.call('SET', KEYS[5], 'running', 'PX', tonumber(ARGV[5]))
  -- A 1.0 instance's heartbeat id has no '/' (base64url); 1.1's ids have one.
  local legacy = 0
  for _, id in ipairs(redis.call('ZRANGE', KEYS[6], now - tonumber(ARGV[6]), '+inf', 'BYSCORE')) do
    if not string.find(id, '/', 1, true) then legacy = legacy + 1 end
  end
  return { seq, now, 0, legacy, '' }
elseif op == 'import-end' then
  if ARGV[5] == 'done' then redis.call('SET', KEYS[5], 'done') end
  return { seq, now, 0, 0, '' }
end
return redis.error_reply('denies-write.lua: unknown operation ' .. tostring(op))
