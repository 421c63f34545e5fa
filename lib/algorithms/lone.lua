--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. Plain arguments, no JSON, no loop; the one
  algorithm's fragment is spliced in where the marker stands.
    KEYS  state key, lockout key, the tracker's deny key (one {hash tag})
    ARGV  mode ('c' consume | 'p' peek), cost, limit, window (ms), burst, blockFor (ms, 0 = none), token
          (a calendar window or an escalating lockout goes to decide.lua, which reads nested values)
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

local _, alg = next(ALG)
decideOne(alg, ARGV[1], KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], 2)
return reply
