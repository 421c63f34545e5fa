--[[
  sliding-window: Cloudflare's approximation. Counts of the current and previous aligned windows; the
  previous one weighs by how much of it still overlaps the sliding window:
  allowed iff prev·(W − e) + (cur + cost)·W <= limit·W, e = ms into the current window (exact integers).

  Fragment of algorithm id 2 (the fragment contract is in decide.lua's header): helpers, then its check, commit
  and refund blocks. Inputs: the policy's state key, cost (units), limit (units per window), window (W, ms),
  now (server ms), token (a settlement's charge time, ms, or ''). Uses state.lua.
  KEY    state string "<current window id>:<its count>:<previous window's count>" (state.lua)
  check  s1 = the window id, s2 = the new count, s3 = prev, s4 = whether the expiry moves; more = ms until the
         weighted count has dropped by enough to raise floor(remaining)
]]
local function slidingCounts(key, window, now)
  local id = math.floor(now / window)
  local v = redis.call('GET', key)
  if not v then return id, 0, 0, true end
  local w, c, p = string.match(v, '^(%d+):(%d+):(%d+)$')
  if not w then foreignValue(key, v) end
  local sid = tonumber(w)
  if sid == id then return id, tonumber(c), tonumber(p), false end
  if sid == id - 1 then return id, 0, tonumber(c), true end
  return id, 0, 0, true
end

-- Writes the counts, expiring in px ms, or keeping the key's expiry when px is nil.
local function slidingStore(key, id, cur, prev, px)
  putState(key, string.format('%d:%d:%d', id, cur, prev), px)
end

local function slidingReset(id, cur, prev, window, now)
  if cur > 0 then return (id + 2) * window - now end
  if prev > 0 then return (id + 1) * window - now end
  return 0
end

-- The earliest time (ms from now) a request of cost fits: later in this window, or in the next one.
local function slidingRetry(id, e, cur, prev, cost, limit, window, now)
  local room = (limit - cur - cost) * window
  if room >= 0 and prev > 0 then
    local e2 = window - math.floor(room / prev)
    if e2 < window then return e2 - e end
  end
  local e2 = 0
  if cur > 0 then e2 = math.max(window - math.floor((limit - cost) * window / cur), 0) end
  return (id + 1) * window + e2 - now
end

-- When floor(remaining) next grows: when one more unit than the `remaining` left would fit. 0 when nothing is used.
local function slidingMore(id, e, cur, prev, remaining, limit, window, now)
  if cur == 0 and prev == 0 then return 0 end
  return slidingRetry(id, e, cur, prev, remaining + 1, limit, window, now)
end

--@check
local id, cur, prev, fresh = slidingCounts(key, window, now)
local e = now - id * window
local used = prev * (window - e) + cur * window
if used + cost * window <= limit * window then
  ok, remaining, retry, delay = true, math.floor((limit * window - used - cost * window) / window), 0, 0
  reset = slidingReset(id, cur + cost, prev, window, now)
  more = slidingMore(id, e, cur + cost, prev, remaining, limit, window, now)
  s1, s2, s3, s4 = id, cur + cost, prev, fresh or cur == 0
else
  ok, remaining, delay = false, math.floor(math.max(limit * window - used, 0) / window), 0
  reset = slidingReset(id, cur, prev, window, now)
  retry = slidingRetry(id, e, cur, prev, cost, limit, window, now)
  more = slidingMore(id, e, cur, prev, remaining, limit, window, now)
end
--@commit
if reset ~= 0 then slidingStore(key, s1, s2, s3, s4 and reset or nil) end
--@refund
local id, cur, prev = slidingCounts(key, window, now)
-- A settlement's token is when its units were charged: from an earlier window they come back from the
-- previous window's count while it still weighs, and from older ones not at all.
local at = tonumber(token)
if cost >= 0 and at and math.floor(at / window) < id then
  if math.floor(at / window) ~= id - 1 or prev == 0 then return end
  local p = math.max(prev - cost, 0)
  if cur == 0 and p == 0 then redis.call('DEL', key) return end
  slidingStore(key, id, cur, p, slidingReset(id, cur, p, window, now))
  return
end
if cur == 0 and cost >= 0 then return end
local c = math.max(cur - cost, 0)
-- A negative cost (a penalty) may open the current window's count: the key must then outlive it.
slidingStore(key, id, c, prev, cur == 0 and slidingReset(id, c, prev, window, now) or nil)
