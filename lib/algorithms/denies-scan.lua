--[[
  One step of the carry-over of 1.0 deny keys (lib/pipeline/deny-import.ts): SCAN on this server (on a Cluster,
  sent to each master on its own connection, with `#!lua flags=allow-cross-slot-keys` before this header) and
  the value of each key found. It writes nothing. A key another node serves now (a reshard) or that holds
  another type is left out.

  KEYS  none
  ARGV  [1] SCAN cursor ('0' to begin)   [2] MATCH pattern (`<prefix>:{*}:deny`, glob-escaped)   [3] COUNT
  Reply: { next cursor ('0' when done), { key, value, key, value, … } }
]]
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', tonumber(ARGV[3]))
local found = {}
for _, key in ipairs(r[2]) do
  local ok, value = pcall(redis.call, 'GET', key)
  if ok and value then
    found[#found + 1] = key
    found[#found + 1] = value
  end
end
return { r[1], found }
