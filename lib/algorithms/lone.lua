--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy (its keys, and its one JSON argument: Node pays per argument), without the loop and the error
  slots; the one algorithm's fragment is spliced in where the marker stands. An escalating lockout goes to
  decide.lua.
  Reply: { now, then the decision's six slots }, as one decision of decide.lua's reply. An error (a key holding
  someone else's data) fails the call.
]]
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
local ALG = {}
--@fragments

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reply = { now, 0, 0, 0, 0, 0, 0 }
--@decide-one

local d = cjson.decode(ARGV[1])
decideOne(ALG[d[2]], d[1], KEYS[1], KEYS[2], KEYS[3], d[3], d[4], d[5], d[6], d[7], d[8], 2)
return reply
