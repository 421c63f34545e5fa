--[[
  Runs the decision scripts under a stock Lua 5.4 interpreter (`lua5.4`, Debian's package), the Lua Dragonfly
  embeds, and reports each call's reply and every breach of the rules a Lua 5.4 server and a server that
  requires declared keys (Dragonfly) impose. It checks the Lua dialect, not Redis: every call was first run on
  the real redis-server (script-rules.spec.ts), which recorded each command the script sent and the server's
  reply to it. Here `redis.call` answers with those recorded replies, in order, after checking that the script
  under Lua 5.4 sends exactly the commands and arguments it sent under Redis's Lua 5.1; so Redis behaviour comes
  from redis-server only, and a script whose Lua 5.4 run would take another path is caught. The breaches:
    - a key a command touches that is not one of the call's KEYS ("undeclared key"), or for a script across
      slots (a Cluster's batch per master, Redis 7's `#!lua flags=allow-cross-slot-keys`: its keys come as
      ARGV[2 ..]) one of those;
    - a float passed to redis.call or returned (Lua 5.4 keeps floats apart from integers: Dragonfly formats a
      float argument with %.17g and replies a float as a double, where Redis's Lua 5.1 truncates it);
    - a command or argument other than the one redis-server ran at that point, or more or fewer commands;
    - a global variable read or created (servers run scripts in a strict environment);
    - anything else the script raises.

  Input (stdin, JSON): { "cjsonIntegers": bool, "scripts": [source, ...],
                         "calls": [ { "script": index (1-based), "keys": [...], "argv": [...],
                                      "commands": [ [ [name, arg, ...], reply ], ... ] } ] }
  where a recorded reply is a string, false (nil bulk), { "n": "%.17g" } (an integer), { "ok": status },
  { "err": message } or an array of replies.
  Output (stdout): one JSON line per call: { "reply": ..., "error": message or null, "violations": [...] }.
  Run: lua5.4 test/support/lua54-harness.lua < input.json
]]
local HERE = arg[0]:match('^(.*[/\\])') or './'
local json = dofile(HERE .. 'lua-json.lua')

local input = json.decode(io.read('a'), true)
local cjsonIntegers = input.cjsonIntegers

local declared = {}    -- the current call's KEYS, as a set
local violations = {}  -- the current call's
local recorded = {}    -- the current call's commands as redis-server ran them, and its replies
local sent = 0         -- commands the script has sent so far in the current call

local function note(text)
  for _, seen in ipairs(violations) do if seen == text then return end end
  violations[#violations + 1] = text
end

--- A recorded reply as the script receives it from the server: integers as Lua 5.4 integers.
local function replay(v)
  if type(v) ~= 'table' or v == json.null then return v end
  if v.n then return math.tointeger(tonumber(v.n)) or tonumber(v.n) end
  if v.ok or v.err then return v end
  local out = {}
  for i = 1, #v do out[i] = replay(v[i]) end
  return out
end

--- Which arguments of a command are keys: every one, or the first; none for TIME.
local ALL_KEYS = { DEL = true, UNLINK = true, EXISTS = true }
local NO_KEYS = { TIME = true }

--- redis.call / redis.pcall: checks the arguments as a Lua 5.4 server would, then answers as redis-server did.
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
  sent = sent + 1
  local expected = recorded[sent]
  if not expected then error('harness: the script sent more commands than redis-server ran (' .. cmd .. ')', 0) end
  local ran = expected[1]
  local same = #ran == args.n + 1 and ran[1] == name
  for i = 1, args.n do same = same and ran[i + 1] == args[i] end
  if not same then
    local shown = { name }
    for i = 1, args.n do shown[#shown + 1] = args[i] end
    note(string.format('command %d differs: %s here, %s on redis-server', sent, table.concat(shown, ' '), table.concat(ran, ' ')))
  end
  local result = replay(expected[2])
  if raise and type(result) == 'table' and result.err then error(result, 0) end
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
local acrossSlots = {} -- per script: whether its keys come as ARGV[2 ..]
for i, source in ipairs(input.scripts) do
  -- A shebang line is Redis's, not Lua's: Redis compiles what follows it (kept as an empty line, so lines match).
  local fn, err = load((source:gsub('^#![^\n]*', '')), '@user_script', 't', env)
  if not fn then
    io.write(json.encode({ reply = json.null, error = 'compile: ' .. err, violations = {} }), '\n')
    os.exit(1)
  end
  compiled[i] = fn
  acrossSlots[i] = source:sub(1, 2) == '#!'
end

for _, c in ipairs(input.calls) do
  violations = {}
  declared = {}
  recorded = c.commands
  sent = 0
  for _, key in ipairs(c.keys) do declared[key] = true end
  if acrossSlots[c.script] then
    for i = 2, #c.argv do declared[c.argv[i]] = true end
  end
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
  if sent < #recorded then note(string.format('%d commands here, %d on redis-server', sent, #recorded)) end
  io.write(json.encode({ reply = reply, error = message, violations = violations }), '\n')
end
