--[[
  Runs the decision scripts under a stock Lua 5.4 interpreter (`lua5.4`, Debian's package), the Lua Dragonfly
  embeds, and reports each call's reply and every breach of the rules a Lua 5.4 server and a server that
  requires declared keys (Dragonfly) impose. It checks the Lua dialect, not Redis: `redis.call` here is an
  in-memory keyspace that must answer exactly as the real redis-server did. script-rules.spec.ts runs every
  call on a real redis-server first and fails on any reply this harness gives differently. The breaches:
    - a key a command touches that is not one of the call's KEYS ("undeclared key");
    - a float passed to redis.call or returned (Lua 5.4 keeps floats apart from integers: Dragonfly formats a
      float argument with %.17g and replies a float as a double, where Redis's Lua 5.1 truncates it);
    - a global variable read or created (servers run scripts in a strict environment);
    - anything else the script raises.
  Redis semantics the scripts rely on are mirrored: TIME, replies converted as Redis converts them (numbers
  truncated to integers, `false` to nil, tables to arrays up to the first nil), `nil` bulk replies as `false`,
  key expiry at the call's time (a key lives while now <= its expiry, as in Redis), and WRONGTYPE errors.

  Input (stdin, JSON): { "cjsonIntegers": bool, "scripts": [source, ...],
                         "calls": [ { "script": index (1-based), "keys": [...], "argv": [...], "nowMs": ms } ] }
  Output (stdout): one JSON line per call: { "reply": ..., "error": message or null, "violations": [...] }.
  Run: lua5.4 test/support/lua54-harness.lua < input.json
]]
local HERE = arg[0]:match('^(.*[/\\])') or './'
local json = dofile(HERE .. 'lua-json.lua')

local input = json.decode(io.read('a'), true)
local cjsonIntegers = input.cjsonIntegers

local db = {}          -- key -> { kind = 'string' | 'hash' | 'zset', value = ..., expires = ms or nil }
local now = 0          -- the current call's time, ms
local declared = {}    -- the current call's KEYS, as a set
local violations = {}  -- the current call's

local function note(text)
  for _, seen in ipairs(violations) do if seen == text then return end end
  violations[#violations + 1] = text
end

local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

--- The live entry of `key` (expired entries are dropped first), or nil.
local function entry(key)
  local e = db[key]
  if e and e.expires and now > e.expires then db[key] = nil return nil end
  return e
end

--- The entry of `key` of `kind`, created when absent (`create`), or nil; raises WRONGTYPE for another kind.
local function typed(key, kind, create)
  local e = entry(key)
  if e and e.kind ~= kind then error({ err = WRONGTYPE }) end
  if not e and create then
    e = { kind = kind, value = {} }
    db[key] = e
  end
  return e
end

local function int(s)
  local n = math.tointeger(tonumber(s))
  if not n then error({ err = 'ERR value is not an integer or out of range' }) end
  return n
end

local function score(s)
  if s == '-inf' then return -math.huge, false end
  if s == '+inf' or s == 'inf' then return math.huge, false end
  local open = s:sub(1, 1) == '('
  local n = tonumber(open and s:sub(2) or s)
  if not n then error({ err = 'ERR min or max is not a float' }) end
  return n, open
end

local function formatScore(n)
  if math.type(n) == 'integer' or (n == math.floor(n) and math.abs(n) < 2 ^ 53) then return string.format('%d', n) end
  return string.format('%.17g', n)
end

--- Members of a sorted set in Redis order (score, then member bytes).
local function ordered(e)
  local list = {}
  for member, s in pairs(e.value) do list[#list + 1] = { member = member, score = s } end
  table.sort(list, function(a, b)
    if a.score ~= b.score then return a.score < b.score end
    return a.member < b.member
  end)
  return list
end

--- A rank range (negative ranks count from the end) as 1-based indexes into a list of `n`.
local function ranks(n, start, stop)
  start, stop = int(start), int(stop)
  if start < 0 then start = math.max(n + start, 0) end
  if stop < 0 then stop = n + stop end
  if stop >= n then stop = n - 1 end
  return start + 1, stop + 1
end

local function inRange(s, min, minOpen, max, maxOpen)
  return (s > min or (not minOpen and s == min)) and (s < max or (not maxOpen and s == max))
end

local COMMANDS = {}

function COMMANDS.TIME()
  return { string.format('%d', now // 1000), string.format('%d', (now % 1000) * 1000) }
end

function COMMANDS.GET(key)
  local e = typed(key, 'string')
  return e and e.value or false
end

function COMMANDS.SET(key, value, ...)
  local options, ttl, keep = { ... }, nil, false
  local i, nx, xx = 1, false, false
  while i <= #options do
    local o = options[i]:upper()
    if o == 'PX' then ttl = int(options[i + 1]) i = i + 1
    elseif o == 'EX' then ttl = int(options[i + 1]) * 1000 i = i + 1
    elseif o == 'NX' then nx = true
    elseif o == 'XX' then xx = true
    elseif o == 'KEEPTTL' then keep = true
    else error({ err = 'ERR syntax error (harness: SET ' .. o .. ')' }) end
    i = i + 1
  end
  local old = entry(key)
  if (nx and old) or (xx and not old) then return false end
  if ttl and ttl <= 0 then error({ err = "ERR invalid expire time in 'set' command" }) end
  db[key] = { kind = 'string', value = value, expires = ttl and now + ttl or (keep and old and old.expires or nil) }
  return { ok = 'OK' }
end

function COMMANDS.DEL(...)
  local n = 0
  for _, key in ipairs({ ... }) do
    if entry(key) then db[key] = nil n = n + 1 end
  end
  return n
end
COMMANDS.UNLINK = COMMANDS.DEL

function COMMANDS.EXISTS(...)
  local n = 0
  for _, key in ipairs({ ... }) do if entry(key) then n = n + 1 end end
  return n
end

function COMMANDS.PEXPIRE(key, ms)
  local e = entry(key)
  if not e then return 0 end
  ms = int(ms)
  if ms <= 0 then db[key] = nil else e.expires = now + ms end
  return 1
end

function COMMANDS.EXPIRE(key, s) return COMMANDS.PEXPIRE(key, tostring(int(s) * 1000)) end

function COMMANDS.PTTL(key)
  local e = entry(key)
  if not e then return -2 end
  return e.expires and e.expires - now or -1
end

function COMMANDS.TYPE(key)
  local e = entry(key)
  return { ok = e and e.kind or 'none' }
end

function COMMANDS.HSET(key, ...)
  local pairsList = { ... }
  if #pairsList == 0 or #pairsList % 2 ~= 0 then error({ err = "ERR wrong number of arguments for 'hset' command" }) end
  local e, added = typed(key, 'hash', true), 0
  for i = 1, #pairsList, 2 do
    if e.value[pairsList[i]] == nil then added = added + 1 end
    e.value[pairsList[i]] = pairsList[i + 1]
  end
  return added
end

function COMMANDS.HMGET(key, ...)
  local e, out = typed(key, 'hash'), {}
  for i, field in ipairs({ ... }) do out[i] = e and e.value[field] or false end
  return out
end

function COMMANDS.HGET(key, field)
  local e = typed(key, 'hash')
  return e and e.value[field] or false
end

function COMMANDS.HDEL(key, ...)
  local e, n = typed(key, 'hash'), 0
  if not e then return 0 end
  for _, field in ipairs({ ... }) do
    if e.value[field] ~= nil then e.value[field] = nil n = n + 1 end
  end
  if next(e.value) == nil then db[key] = nil end
  return n
end

function COMMANDS.HINCRBY(key, field, by)
  local e = typed(key, 'hash', true)
  local v = int(e.value[field] or '0') + int(by)
  e.value[field] = string.format('%d', v)
  return v
end

function COMMANDS.INCRBY(key, by)
  local e = typed(key, 'string')
  local v = int(e and e.value or '0') + int(by)
  db[key] = { kind = 'string', value = string.format('%d', v), expires = e and e.expires }
  return v
end

function COMMANDS.INCR(key) return COMMANDS.INCRBY(key, '1') end

function COMMANDS.ZADD(key, ...)
  local args, i = { ... }, 1
  local flags = {}
  while args[i] and ({ NX = 1, XX = 1, GT = 1, LT = 1, CH = 1 })[args[i]:upper()] do
    flags[args[i]:upper()] = true
    i = i + 1
  end
  if (#args - i + 1) == 0 or (#args - i + 1) % 2 ~= 0 then error({ err = 'ERR syntax error' }) end
  local e = typed(key, 'zset', not flags.XX)
  if not e then return 0 end
  local added, changed = 0, 0
  for j = i, #args, 2 do
    local s, member = tonumber(args[j]), args[j + 1]
    if not s then error({ err = 'ERR value is not a valid float' }) end
    local old = e.value[member]
    if old == nil then
      if not flags.XX then e.value[member] = s added = added + 1 end
    elseif not flags.NX and not (flags.GT and s <= old) and not (flags.LT and s >= old) and s ~= old then
      e.value[member] = s
      changed = changed + 1
    end
  end
  if next(e.value) == nil then db[key] = nil end
  return flags.CH and added + changed or added
end

function COMMANDS.ZCARD(key)
  local e, n = typed(key, 'zset'), 0
  if e then for _ in pairs(e.value) do n = n + 1 end end
  return n
end

function COMMANDS.ZSCORE(key, member)
  local e = typed(key, 'zset')
  local s = e and e.value[member]
  return s and formatScore(s) or false
end

function COMMANDS.ZCOUNT(key, min, max)
  local e, n = typed(key, 'zset'), 0
  if not e then return 0 end
  local lo, loOpen = score(min)
  local hi, hiOpen = score(max)
  for _, s in pairs(e.value) do if inRange(s, lo, loOpen, hi, hiOpen) then n = n + 1 end end
  return n
end

function COMMANDS.ZRANGE(key, start, stop, ...)
  local options = { ... }
  local withScores = false
  for _, o in ipairs(options) do
    if o:upper() == 'WITHSCORES' then withScores = true
    else error({ err = 'ERR syntax error (harness: ZRANGE by rank only, ' .. o .. ')' }) end
  end
  local e = typed(key, 'zset')
  if not e then return {} end
  local list = ordered(e)
  local from, to = ranks(#list, start, stop)
  local out = {}
  for i = from, to do
    out[#out + 1] = list[i].member
    if withScores then out[#out + 1] = formatScore(list[i].score) end
  end
  return out
end

function COMMANDS.ZREM(key, ...)
  local e, n = typed(key, 'zset'), 0
  if not e then return 0 end
  for _, member in ipairs({ ... }) do
    if e.value[member] ~= nil then e.value[member] = nil n = n + 1 end
  end
  if next(e.value) == nil then db[key] = nil end
  return n
end

function COMMANDS.ZREMRANGEBYRANK(key, start, stop)
  local e = typed(key, 'zset')
  if not e then return 0 end
  local list = ordered(e)
  local from, to, n = ranks(#list, start, stop)
  n = 0
  for i = from, to do e.value[list[i].member] = nil n = n + 1 end
  if next(e.value) == nil then db[key] = nil end
  return n
end

function COMMANDS.ZREMRANGEBYSCORE(key, min, max)
  local e, n = typed(key, 'zset'), 0
  if not e then return 0 end
  local lo, loOpen = score(min)
  local hi, hiOpen = score(max)
  for member, s in pairs(e.value) do
    if inRange(s, lo, loOpen, hi, hiOpen) then e.value[member] = nil n = n + 1 end
  end
  if next(e.value) == nil then db[key] = nil end
  return n
end

--- Which arguments of a command are keys: every one, or the first; none for TIME.
local ALL_KEYS = { DEL = true, UNLINK = true, EXISTS = true }
local NO_KEYS = { TIME = true }

--- redis.call / redis.pcall: checks the arguments as a Lua 5.4 server would, then runs the command.
local function call(raise, name, ...)
  if type(name) ~= 'string' then error({ err = 'ERR Please specify at least one argument for this redis lib call' }) end
  local cmd = name:upper()
  local args = table.pack(...)
  for i = 1, args.n do
    local a = args[i]
    if type(a) == 'number' then
      if math.type(a) == 'float' then
        note(string.format('float argument %s to %s (Lua 5.4 keeps it a float: Dragonfly sends it as %%.17g, so 3.0 and 3 differ in type)', string.format('%.17g', a), cmd))
        args[i] = string.format('%.17g', a)
      else
        args[i] = string.format('%d', a)
      end
    elseif type(a) ~= 'string' then
      error({ err = 'ERR Lua redis lib command arguments must be strings or integers' })
    end
  end
  local keys = ALL_KEYS[cmd] and { table.unpack(args, 1, args.n) } or (NO_KEYS[cmd] and {} or { args[1] })
  for _, key in ipairs(keys) do
    if not declared[key] then note(string.format('undeclared key %q in %s', key, cmd)) end
  end
  local impl = COMMANDS[cmd]
  if not impl then error('harness: command ' .. cmd .. ' is not implemented in test/support/lua54-harness.lua; add it there', 0) end
  local ok, result = pcall(impl, table.unpack(args, 1, args.n))
  if ok then return result end
  if type(result) ~= 'table' then error(result, 0) end
  if raise then error(result, 0) end
  return result
end

--- The strict environment servers give scripts: only these globals, and none can be created.
local function sandbox()
  local allowed = {
    redis = {
      call = function(...) return call(true, ...) end,
      pcall = function(...) return call(false, ...) end,
      error_reply = function(m) return { err = m } end,
      status_reply = function(m) return { ok = m } end,
    },
    cjson = { decode = function(text) return json.decode(text, cjsonIntegers) end },
    math = math, string = string, table = table,
    tonumber = tonumber, tostring = tostring, type = type, pairs = pairs, ipairs = ipairs, next = next,
    select = select, pcall = pcall, error = error, assert = assert, setmetatable = setmetatable,
    getmetatable = getmetatable, rawget = rawget, rawset = rawset, rawequal = rawequal,
  }
  local env = {}
  return setmetatable(env, {
    __index = function(_, k)
      local v = allowed[k]
      if v == nil then error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2) end
      return v
    end,
    __newindex = function(_, k, v)
      if k == 'KEYS' or k == 'ARGV' then rawset(allowed, k, v) return end
      error("Script attempted to create global variable '" .. tostring(k) .. "'", 2)
    end,
  })
end

--- A script reply as a client receives it from Redis (and as Dragonfly with legacy floats sends it).
local function convert(v)
  local t = type(v)
  if t == 'number' then
    if math.type(v) == 'float' then
      note(string.format('float reply %s (Lua 5.1 Redis truncates it to an integer; Dragonfly replies a double)', string.format('%.17g', v)))
      return math.tointeger(v >= 0 and math.floor(v) or math.ceil(v)) or v
    end
    return v
  end
  if t == 'string' then return v end
  if t == 'boolean' then return v and 1 or json.null end
  if t == 'table' then
    if type(v.err) == 'string' then error(v.err, 0) end
    if type(v.ok) == 'string' then return v.ok end
    local out, i = { n = 0 }, 1
    while v[i] ~= nil do
      out[i] = convert(v[i])
      out.n = i
      i = i + 1
    end
    return out
  end
  return json.null
end

local env = sandbox()
local compiled = {}
for i, source in ipairs(input.scripts) do
  local fn, err = load(source, '@user_script', 't', env)
  if not fn then
    io.write(json.encode({ reply = json.null, error = 'compile: ' .. err, violations = {} }), '\n')
    os.exit(1)
  end
  compiled[i] = fn
end

for _, c in ipairs(input.calls) do
  now = c.nowMs
  violations = {}
  declared = {}
  for _, key in ipairs(c.keys) do declared[key] = true end
  env.KEYS = c.keys
  env.ARGV = c.argv
  local ok, result = pcall(compiled[c.script])
  local reply, message = json.null, json.null
  if ok then
    ok, result = pcall(convert, result)
    if ok then reply = result else message = tostring(result) end
  else
    message = type(result) == 'table' and tostring(result.err) or tostring(result)
  end
  io.write(json.encode({ reply = reply, error = message, violations = violations }), '\n')
end
