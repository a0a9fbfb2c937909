-- handoff: an enqueue claims for idle workers. A claim that leaves a worker with free slots and nothing
-- to take parks it in `idle-workers` (consumer → '<free slots> <lock ms> <until ms> <token> <handed>
-- [<owed until ms>]': the token is the parking claim's, handed how many messages it was given since, owed
-- until when those carried over from earlier parkings count; conf `handoff` is '1'
-- while any is parked, so an enqueue learns it from the conf read it makes anyway). An enqueue that makes
-- messages ready pops them at once for a parked worker, locks them as a claim would (lib/hold.lua) and
-- pushes them, as one entry (the parking's token, the queue's size, then six fields per message as a claim
-- replies them), to the
-- worker's list `idle-workers:<consumer>`, where its blocked BLPOP takes them:
-- the message reaches the handler one round trip after the enqueue instead of three (wake-up, claim, reply).
-- A worker's next claim unparks it, and takes fewer messages by those handed to it that it had not received
-- when it sent the claim (it says how many handed messages arrived since its last claim went out), so the
-- worker never holds more than its slots. Those still on their way then stay owed: the claim's parking
-- starts its count of handed messages with them (or, when the claim does not park, a record of free
-- slots 0 keeps them), so the next claim takes fewer by them too, unless they arrived before it went out.
-- They stay owed for one lock at most from the claim that first found them on their way: by then the worker
-- takes any of them that still arrives as lost, and one whose BLPOP reply was lost with its connection
-- (Redis restarted, say) never arrives, so owing it longer would shrink the worker's claims for good.
-- A parking ends by itself at its `until` (the worker claims before, see PARK_MS), so a worker that died
-- parked takes messages for a few seconds at most (they wait for their lock to end, as a dead worker's held
-- messages do). Only priority-0 messages of the lanes an
-- enqueue filled are handed off, to workers that accept every filter class, on queues with no groups,
-- no rate limit and not paused: everything else waits for a claim, as before.
-- Scripts include common, events and hold first.
--
-- KEYS: conf idle-workers groups

-- A parked worker claims again within this long (or half its lock), and its parking ends PARK_GRACE_MS (or a
-- quarter of its lock) after that.
local PARK_MS = 5000
local PARK_GRACE_MS = 1000
-- Entries are pushed with this TTL past the lock's end: a list no worker reads any more goes away.
local HANDOFF_TTL_MS = 60000

-- A parking's value, and its fields back (nil for a value of another shape). `until_ms` stays a string:
-- Lua would write a number that large in exponent form.
local function parking_value(free, lock_ms, until_ms, token, handed, owed_until)
  local value = free .. ' ' .. lock_ms .. ' ' .. until_ms .. ' ' .. token .. ' ' .. handed
  if owed_until then return value .. ' ' .. owed_until end
  return value
end
local function parking_fields(value)
  local free, lock_ms, until_ms, token, handed, owed_until =
    string.match(value, '^(%d+) (%d+) (%d+) (%S+) (%d+) (%d+)$')
  if not free then
    free, lock_ms, until_ms, token, handed = string.match(value, '^(%d+) (%d+) (%d+) (%S+) (%d+)$')
  end
  return tonumber(free), tonumber(lock_ms), until_ms, token, tonumber(handed), owed_until
end

-- The list a worker's handed messages wait in.
local function handoff_list(consumer)
  return K.idle_workers .. ':' .. consumer
end

-- Ends `consumer`'s parking (its claim, or its stop); `flagged`: conf `handoff` was '1'. `token` and
-- `received` (strings, or nil): the worker sent its last claim with that token, and that many handed messages
-- reached it since; `now` the time of the call. Returns whether conf `handoff` is still '1' (other workers are
-- parked), how many messages handed to it are still on their way, and until when they are owed (a string, or
-- nil for from now on).
local function unpark_worker(consumer, flagged, token, received, now)
  if not flagged then return false, 0 end
  local parking = redis.call('HGET', K.idle_workers, consumer)
  if not parking then return true, 0 end
  local _, _, _, parked_token, handed, owed_until = parking_fields(parking)
  local on_the_way = handed or 0
  if parked_token == token then on_the_way = math.max(0, on_the_way - (tonumber(received) or 0)) end
  if owed_until and now and tonumber(owed_until) <= now then on_the_way = 0 end
  redis.call('HDEL', K.idle_workers, consumer)
  if redis.call('EXISTS', K.idle_workers) == 1 then return true, on_the_way, owed_until end
  redis.call('HDEL', K.conf, 'handoff')
  return false, on_the_way, owed_until
end

-- Parks `consumer` with `free` slots, `owed` handed messages still on their way to it (owed until `owed_until`,
-- or from now for a lock); returns the time by which it should claim again (`wake_at` or sooner). With `free`
-- 0 it is a record of what is owed, which enqueues skip.
local function park_worker(consumer, free, lock_ms, now, wake_at, flagged, token, owed, owed_until)
  -- Within half a lock, and its grace a quarter: the worker counts a handed message's lock from the parking
  -- claim's send (it cannot know the enqueue's time), so a parking older than a lock would hand it messages
  -- it takes as already lost.
  wake_at = math.min(wake_at, now + math.min(PARK_MS, math.floor(lock_ms / 2)))
  local ends = wake_at + math.min(PARK_GRACE_MS, math.floor(lock_ms / 4))
  if owed == 0 then
    owed_until = nil
  elseif not owed_until then
    owed_until = num_str(now + lock_ms)
  end
  local value = parking_value(free, lock_ms, num_str(ends), token, owed, owed_until)
  redis.call('HSET', K.idle_workers, consumer, value)
  if not flagged then redis.call('HSET', K.conf, 'handoff', '1') end
  return wake_at
end

-- A field as '<length>:<bytes>', nil or false as '-:'.
local function framed(value)
  if not value then return '-:' end
  local s = tostring(value)
  return #s .. ':' .. s
end

-- Takes up to `want` ready messages of a priority-0 lane for a handoff: the lane's list first (older), then
-- those this enqueue has yet to push there (`pending`, from pending_ready, oldest first), which then never
-- enter the list. Appends them to ids/class_at from n + 1; returns the new n.
local function take_ready(ready, lane, want, ids, class_at, n)
  local list = ready_list(lane)
  local waiting = redis.call('LLEN', list)
  if waiting > 0 then
    for _, id in ipairs(redis.call('RPOP', list, math.min(want, waiting))) do
      n = n + 1
      ids[n], class_at[n] = id, lane
    end
    want = want - math.min(want, waiting)
  end
  local pending = ready.back[lane]
  if want == 0 or pending == nil then return n end
  local taken = math.min(want, #pending)
  for i = 1, taken do
    n = n + 1
    ids[n], class_at[n] = pending[i], lane
  end
  ready.count = ready.count - taken
  if taken == #pending then
    ready.back[lane] = nil
  else
    ready.back[lane] = { unpack(pending, taken + 1) }
  end
  return n
end

-- Hands ready messages of `lanes` (the priority-0 lanes an enqueue pushes to, before it flushes `ready`) to
-- parked workers; `conf` holds the queue's paused and rate_limit fields. Returns how many it handed off.
local function hand_off(ready, lanes, conf, now)
  if conf.paused == '1' or (conf.rate_limit and conf.rate_limit ~= '') then return 0 end
  if redis.call('EXISTS', K.groups) == 1 then return 0 end
  local parked = redis.call('HGETALL', K.idle_workers)
  local handed, lane_at, size = 0, 1, nil
  for i = 1, #parked, 2 do
    if lane_at > #lanes then break end
    local consumer = parked[i]
    local free, lock_ms, until_ms, token, before, owed_until = parking_fields(parked[i + 1])
    if (tonumber(until_ms) or 0) <= now then
      -- Its worker did not claim again in time: gone, or cut off from Redis (or not a parking kvmq wrote).
      unpark_worker(consumer, true, nil, nil)
    elseif free > 0 then
      local ids, class_at, n = {}, {}, 0
      while n < free and lane_at <= #lanes do
        n = take_ready(ready, lanes[lane_at], free - n, ids, class_at, n)
        if n < free then lane_at = lane_at + 1 end
      end
      local reply, held = { token, false }, 0
      if n > 0 then held = hold(consumer, ids, class_at, n, lock_ms, now, reply) end
      if held > 0 then
        size = size or queue_size()
        reply[2] = size
        local parts = {}
        for j = 1, #reply do parts[j] = framed(reply[j]) end
        local list = handoff_list(consumer)
        redis.call('RPUSH', list, table.concat(parts))
        redis.call('PEXPIREAT', list, now + lock_ms + HANDOFF_TTL_MS)
        handed = handed + held
        -- Kept at 0 free slots until its claim (which reads how many it was handed).
        local parking = parking_value(free - held, lock_ms, until_ms, token, before + held, owed_until)
        redis.call('HSET', K.idle_workers, consumer, parking)
      end
    end
  end
  if handed > 0 then reset_dry_runs(redis.call('GET', K.ndry_runs)) end
  return handed
end
