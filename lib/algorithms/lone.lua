--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots; its one algorithm's fragment is spliced in
  where the marker stands, so no algorithm id is sent. Arguments are plain numbers, not JSON, and the reply
  leaves out the slots that are 0 in the usual decision: each argument and each integer costs the client
  more than the few tonumber calls cost here (the TS encoder and parser are in redis-codec.ts).

  KEYS  [1] state key, [2] lockout key, [3] the tracker's deny key (one {hash tag})
  ARGV  [1] cost (units), [2] limit, [3] window (ms),
        [4] blockFor (ms, 0 = none) for a consume; 'p' for a peek (a peek starts no lockout),
        [5] burst, for an algorithm whose capacity it is (token-bucket, gcra, leaky-bucket); for the others the
            token (a lease id), absent when empty
  Reply: { now (server ms), status, remaining, reset (ms), more (ms), retry after (ms, -1 = never), delay (ms;
         a deny's reason in its place) }: decide.lua's six slots of one decision, reordered, with delay left
         out when 0 (no reason), and retry after too when delay is left out and it is 0 as well (an allowed
         decision's); status is a VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
--@verdicts
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
local ALG = {}
--@fragments
--@decide-one

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local _, alg = next(ALG)
local limit = tonumber(ARGV[2])
local mode, blockFor = 'c', tonumber(ARGV[4])
if not blockFor then mode, blockFor = 'p', 0 end
local burst, token = limit, ARGV[5] or ''
if alg.burst then burst, token = tonumber(token), '' end
local reply = { now, 0, 0, 0, 0, 0, 0 }
decideOne(reply, 2, now, alg, mode, KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), limit, tonumber(ARGV[3]), burst, blockFor, token)
-- decideOne wrote { status, remaining, reset, retry, delay, more } from slot 2.
local retry, delay = reply[5], reply[6]
reply[5] = reply[7]
if delay ~= 0 then
  reply[6], reply[7] = retry, delay
elseif retry ~= 0 then
  reply[6], reply[7] = retry, nil
else
  reply[6], reply[7] = nil, nil
end
return reply
