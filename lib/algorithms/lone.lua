--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots; the one algorithm's fragment is spliced in
  where the marker stands.

  KEYS  [1] state key, [2] lockout key, [3] the tracker's deny key (one {hash tag})
  ARGV  [1] one JSON array, decide.lua's for one policy (its header has the layout):
          [ mode ('c' | 'p'), algorithm id, cost (units), limit, window (ms), burst, blockFor (ms, 0 = none), token ]
  Reply: { now (server ms), status, remaining, reset (ms), retry after (ms, -1 = never), delay (ms; a deny's
         reason in its place, 0 without one), more (ms) }: one decision of decide.lua's reply; status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
--@verdicts
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
local ALG = {}
--@fragments
--@decide-one

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reply = { now, 0, 0, 0, 0, 0, 0 }
local d = cjson.decode(ARGV[1])
decideOne(reply, 2, now, ALG[d[2]], d[1], KEYS[1], KEYS[2], KEYS[3], d[3], d[4], d[5], d[6], d[7], d[8])
return reply
