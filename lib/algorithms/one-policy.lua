--[[
  The script for one decision of one policy (decide-one.lua): what every quiet API, a Cluster and
  `batchDecisions: false` send for nearly every request. The call is decide.lua's for one decision of one
  policy, consumed or peeked, with a plain window and a plain lockout (an escalating lockout or a calendar
  window goes to decide.lua), without the loop and the error slots. Its one algorithm's helpers and its
  instance of decide-one.lua (the algorithm's check and commit blocks written in: no fragment table and no
  closure per block, which every call would build again) are spliced in where the marker stands, so no
  algorithm id is sent; the burst marker reads burst from the argument for an algorithm whose capacity it is.
  Its one argument holds the values joined by spaces, no JSON: parsing it costs Redis what cjson.decode did,
  and one argument costs the client less than several. The decision is decide-one.lua's function body written
  inline (its returns as breaks out of a `repeat … until true`), and helpers the script never calls are left
  out: every function a script defines is a closure Redis builds again on every call.
  The reply leaves out the slots that are 0 in the usual decision: each integer costs the client to read.
  The TS encoder and parser are onePolicyCall and parseOnePolicyReply in redis-codec.ts.

  KEYS  [1] state key, [2] lockout key (one {hash tag}); no deny key: each instance answers a denied tracker
        itself, before any script (lib/pipeline/deny-list.ts)
  ARGV  [1] '<cost> <limit> <window> <blockFor>[ <burst or token>]': cost (units; 'n<units>' for a negative
            cost, a lease's renewal; '<cost>+<hold>' with the units a `reserve` holds back for higher
            criticalities: checked with cost + hold, charged cost), limit, window (ms); blockFor (ms, 0 = none)
            for a consume, 'p' for a peek (a peek starts no lockout); then burst for an algorithm whose capacity
            it is (token-bucket, gcra, leaky-bucket), for the others the token (a lease id, the rest of the
            string as it is), left out with its space when empty; every number in hex
        [2] present ('t') when the caller needs the server's clock in the reply (a charge that may be given
            back later says when it was made); an algorithm that reads the clock only when it needs it
            (fixed-window) reads it then, and replies now 0 when it did not
  Reply: { now (server ms; 0 when not read), status, remaining, reset (ms), more (ms), retry after (ms, -1 =
         never), delay (ms) }: decide.lua's six slots of one decision, reordered, with delay left out when 0,
         and retry after too when delay is left out and it is 0 as well (an allowed decision's); status is a
         VERDICT_* code. An error (a key holding someone else's data) fails the call.
]]
--@verdicts
local function ceildiv(a, b) return math.floor((a + b - 1) / b) end
--@fragments

--@body
--@clock
local cost, limit, window, blockFor, token = string.match(ARGV[1], '^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
-- Numbers come in hex: tonumber reads them with strtoul, where decimal takes strtod, several times the work.
local hold = 0
limit, window = tonumber(limit, 16), tonumber(window, 16)
local units = tonumber(cost, 16)
if units then
  cost = units
else
  -- A lease's renewal ('n' before its units: a negative cost), or a reserve's hold ('+' after the cost).
  local sign, held
  sign, units, held = string.match(cost, '^(n?)(%x+)%+?(%x*)$')
  cost = tonumber(units, 16)
  if sign == 'n' then cost = -cost end
  if held ~= '' then hold = tonumber(held, 16) end
end
local mode = 'c'
blockFor = tonumber(blockFor, 16)
if not blockFor then mode, blockFor = 'p', 0 end
local burst = limit
--@burst
local reply = { now or 0, 0, 0, 0, 0, 0, 0 }
local o, key, bkey = 2, KEYS[1], KEYS[2]
--@decide
-- The decision wrote { status, remaining, reset, retry, delay, more } from slot 2.
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
