--[[
  A small JSON codec for the Lua 5.4 script harness (test/support/lua54-harness.lua): the decoder stands in for
  the server's `cjson.decode` (the decision arguments are JSON arrays of numbers and strings), and reads the
  harness's input; the encoder writes its output.

  Numbers decode as a server's cjson would decode them under Lua 5.4: `integers = true` gives whole numbers as
  integers (Dragonfly's cjson converts them "for Lua 5.1 compatibility"), `integers = false` gives every number
  as a float (lua-cjson as Redis ships it, built against Lua 5.4).
]]
local json = {}

local function fail(text, at, why)
  error(string.format('JSON: %s at character %d of %q', why, at, text:sub(math.max(1, at - 20), at + 20)), 0)
end

local ESCAPES = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }

local function utf8char(code) return utf8.char(code) end

-- Returns the value starting at text[at] and the position after it.
local function value(text, at, integers)
  at = text:find('%S', at) or fail(text, at, 'unexpected end')
  local c = text:sub(at, at)
  if c == '[' then
    local list, n = {}, 0
    at = text:find('%S', at + 1) or fail(text, at, 'unterminated array')
    if text:sub(at, at) == ']' then return list, at + 1 end
    while true do
      local item
      item, at = value(text, at, integers)
      n = n + 1
      list[n] = item
      at = text:find('%S', at) or fail(text, at, 'unterminated array')
      local sep = text:sub(at, at)
      if sep == ']' then return list, at + 1 end
      if sep ~= ',' then fail(text, at, 'expected , or ]') end
      at = at + 1
    end
  elseif c == '{' then
    local object = {}
    at = text:find('%S', at + 1) or fail(text, at, 'unterminated object')
    if text:sub(at, at) == '}' then return object, at + 1 end
    while true do
      local key
      key, at = value(text, at, integers)
      if type(key) ~= 'string' then fail(text, at, 'object key must be a string') end
      at = text:find('%S', at) or fail(text, at, 'unterminated object')
      if text:sub(at, at) ~= ':' then fail(text, at, 'expected :') end
      object[key], at = value(text, at + 1, integers)
      at = text:find('%S', at) or fail(text, at, 'unterminated object')
      local sep = text:sub(at, at)
      if sep == '}' then return object, at + 1 end
      if sep ~= ',' then fail(text, at, 'expected , or }') end
      at = at + 1
    end
  elseif c == '"' then
    local out, i = {}, at + 1
    while true do
      local ch = text:sub(i, i)
      if ch == '' then fail(text, at, 'unterminated string') end
      if ch == '"' then return table.concat(out), i + 1 end
      if ch == '\\' then
        local e = text:sub(i + 1, i + 1)
        if e == 'u' then
          local code = tonumber(text:sub(i + 2, i + 5), 16) or fail(text, i, 'bad \\u escape')
          i = i + 6
          -- A surrogate pair is one code point.
          if code >= 0xd800 and code <= 0xdbff and text:sub(i, i + 1) == '\\u' then
            local low = tonumber(text:sub(i + 2, i + 5), 16)
            if low and low >= 0xdc00 and low <= 0xdfff then
              code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00)
              i = i + 6
            end
          end
          out[#out + 1] = utf8char(code)
        else
          out[#out + 1] = ESCAPES[e] or fail(text, i, 'bad escape')
          i = i + 2
        end
      else
        local j = text:find('["\\]', i) or fail(text, at, 'unterminated string')
        out[#out + 1] = text:sub(i, j - 1)
        i = j
      end
    end
  elseif text:sub(at, at + 3) == 'true' then
    return true, at + 4
  elseif text:sub(at, at + 4) == 'false' then
    return false, at + 5
  elseif text:sub(at, at + 3) == 'null' then
    return json.null, at + 4
  end
  local literal = text:match('^-?%d+%.?%d*[eE]?[-+]?%d*', at) or fail(text, at, 'unexpected character')
  local number = tonumber(literal) or fail(text, at, 'bad number')
  if integers then
    number = math.tointeger(number) or number
  else
    number = number + 0.0
  end
  return number, at + #literal
end

--- The marker `null` decodes to (cjson's is a light userdata; any unique value does here).
json.null = setmetatable({}, { __tostring = function() return 'null' end })

--- Decodes `text`; `integers` as described above.
function json.decode(text, integers)
  local result, at = value(text, 1, integers)
  if text:find('%S', at) then fail(text, at, 'trailing characters') end
  return result
end

local function encodeString(s)
  return '"' .. s:gsub('[%c"\\]', function(ch)
    local short = { ['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
    return short[ch] or string.format('\\u%04x', ch:byte())
  end) .. '"'
end

--- Encodes strings, numbers (a float keeps its fraction: the harness reports float replies), booleans,
--- `json.null`, and tables: a table with an `n` field or a sequence is an array, any other an object.
function json.encode(v)
  local t = type(v)
  if v == json.null or v == nil then return 'null' end
  if t == 'string' then return encodeString(v) end
  if t == 'boolean' then return tostring(v) end
  if t == 'number' then
    if math.type(v) == 'integer' then return string.format('%d', v) end
    if v ~= v or v == math.huge or v == -math.huge then return encodeString(tostring(v)) end
    return string.format('%.17g', v)
  end
  if t ~= 'table' then error('JSON: cannot encode a ' .. t, 0) end
  if v.n ~= nil or #v > 0 or next(v) == nil then
    local out = {}
    for i = 1, v.n or #v do out[i] = json.encode(v[i]) end
    return '[' .. table.concat(out, ',') .. ']'
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = encodeString(k) .. ':' .. json.encode(v[k]) end
  return '{' .. table.concat(out, ',') .. '}'
end

return json
