#!lua flags=allow-oom
-- claim: locks up to `max` ready messages for a consumer. First moves messages
-- whose backoff or lock ended back to their ready lists, then pops the ready
-- lists of the classes the consumer accepts. When nothing was taken, counts a
-- dry run once per queue-wide end-of-queue backoff (Carmine's eoq-backoff? and
-- ndry-runs) and says when looking again is worthwhile without a wake-up.
-- A paused queue hands out nothing and counts no dry run (checked here, so no claim
-- starts after pause() returned). Each message handed out writes a `started` event (events on).
-- Order: the priority-0 lanes of the accepted classes in turn, then the lanes of lower priorities in
-- priority order (`lanes`). A message whose group already holds group_concurrency is parked instead
-- (lib/groups.lua). With a rate limit (rate_limit in conf), at most what it grants (`rate-tat`). With a
-- per-group rate limit (group_rate_limit), a message of a group whose next start has not come is parked, and
-- the next parked message of each group whose time came is taken first (lib/group-rates.lua).
-- A worker that takes handoffs and is left with free slots and nothing to take is parked (lib/handoff.lua):
-- enqueues then hand it messages directly. Its next claim unparks it first, and takes fewer by the messages
-- handed to it that it had not received when it sent the claim (they stay owed until a claim sent after
-- they arrived).
-- Runs when Redis is out of memory (allow-oom): draining the queue is how memory comes back.
--
-- KEYS: messages metadata filters classes nattempts locks holders backoffs done done-at requeue
--       schedule lock-expiry updated-at mid-circle eoq-backoff? ndry-runs policies pushes conf failed lanes
--       rate-tat layout group-rates group-waits
-- ARGV: consumer id, max, lock ms, the number of filter classes the consumer knows of,
--       five end-of-queue backoffs in ms (after dry run 1, 2, 3, 4, 5 and more), handoffs ('' when the
--       consumer takes none, else '<this claim's token> <the last claim's token> <handed messages received
--       since that claim was sent>'), '*' to accept every class, else the accepted classes ('' for messages
--       without filters)
-- Reply: { 'classes', class... } when the queue's classes changed since the consumer looked
--        (it claimed nothing), else { 'ok', queue size, dry runs, wake-at ms (-1: look again at once; set
--        when it claimed nothing, or took the last ready messages),
--        then six per message: id, content, metadata JSON or nil, filter class, attempt, policy or nil }
-- Include: common events lanes groups group-rates forget flows fail promote hold handoff

-- The layout mark and the dry runs in one read (MGET reads a key of another type as nil: without the mark,
-- check_layout checks both keys and names the foreign one).
local marks = redis.call('MGET', K.layout, K.ndry_runs)
-- The hot path of a claim touches none of these (only promote's moves, groups and rate limits do, after
-- check_rare). It reads conf, then schedule and lock-expiry (promote), before its first write.
check_layout(nil, { 'history', 'losses', 'outcomes', 'enqueued_at', 'requeue_content', 'requeue_schedule', 'dedupe',
  'done_at', 'backoffs', 'priorities', 'lanes', 'groups', 'debounce', 'debounce_of', 'group_held', 'parked',
  'rate_tat', 'filters', 'pushes' }, { 'conf', 'schedule', 'lock_expiry' }, is_layout_mark(marks[1]))
-- At most this many ready lists are read to tell a full claim that it took the last ready messages.
local MAX_DRAINED_READS = 8
local consumer, max, lock_ms, known = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local accept_all = ARGV[11] == '*'

if not accept_all and redis.call('SCARD', K.classes) ~= known then
  local reply = redis.call('SMEMBERS', K.classes)
  table.insert(reply, 1, 'classes')
  return reply
end

local now = now_ms()
local conf = redis.call('HMGET', K.conf, 'paused', 'events', 'events_max_count', 'group_concurrency', 'rate_limit',
  'handoff', 'group_rate_limit')
-- The per-group rate limit's keys, checked before any write, only on a queue that has one (lib/group-rates.lua).
if conf[7] and conf[7] ~= '' then
  check_type(K.group_rates, 'zset')
  check_type(K.group_waits, 'zset')
end
local token, last_token, received = string.match(ARGV[10], '^(%S+) (%S+) (%d+)$')
local parked_any, on_the_way, owed_until = unpark_worker(consumer, conf[6] == '1', last_token, received, now)
max = math.max(0, max - on_the_way)
-- Read before any write: a key of another type fails here (check_rare), not half-way.
local has_lanes, grouped = false, false
if redis.call('EXISTS', K.lanes, K.groups) > 0 then
  check_rare()
  has_lanes = redis.call('EXISTS', K.lanes) == 1
  grouped = redis.call('EXISTS', K.groups) == 1
end
local group_max = tonumber(conf[4])
if conf[1] == '1' then
  -- Resume publishes a wake-up; a worker on a lost subscription looks again within a second.
  return { 'ok', queue_size(), tonumber(marks[2]) or 0, now + 1000 }
end
-- The rate limit (GCRA, as model/rate-limit.ts rateGrant and rateCharge): at most `granted` now, and
-- with none granted, no promotion and no dry run: the worker sleeps until the next slot.
local rate_start, rate_interval = nil, nil
if conf[5] and conf[5] ~= '' then
  check_rare()
  local limit_max, per_ms = string.match(conf[5], '^(%d+)/(%d+)$')
  limit_max, per_ms = tonumber(limit_max), tonumber(per_ms)
  rate_interval = per_ms / limit_max
  rate_start = math.max(tonumber(redis.call('GET', K.rate_tat)) or 0, now)
  local available = math.floor((now + per_ms - rate_start) / rate_interval + 1e-9)
  if available <= 0 then
    local dry = tonumber(marks[2]) or 0
    return { 'ok', queue_size(), dry, math.ceil(rate_start - per_ms + rate_interval) }
  end
  max = math.min(max, available)
end
events_begin({ conf[2], conf[3] })
local w = pending_writes()
local ready = pending_ready()
-- The score of a sorted set's first entry, nil when it is empty.
local function head(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return tonumber(first[2])
end
-- The first backoff and lock to end: promote reads a set again only when its first entry is due, and the
-- wake-up time needs no second read unless promote moved something.
local heads = { schedule = head(K.schedule), expiry = head(K.lock_expiry) }
local promoted = (heads.schedule ~= nil and heads.schedule <= now) or (heads.expiry ~= nil and heads.expiry <= now)
local more = promote(now, ready, w, heads)
flush_writes(w)
flush_ready(ready)
-- Promoted messages of lower priorities may have opened lanes.
if ready.count > 0 and not has_lanes then has_lanes = redis.call('EXISTS', K.lanes) == 1 end

local lists = {}
local accepted = {}
if accept_all then
  lists[1] = ''
  for _, class in ipairs(redis.call('SMEMBERS', K.classes)) do lists[#lists + 1] = class end
else
  for i = 11, #ARGV do
    lists[#lists + 1] = ARGV[i]
    accepted[ARGV[i]] = true
  end
end

local ids, class_at, n = {}, {}, 0
-- The lock end of the messages this claim takes (nil: none taken).
local locked_until = nil
-- Held messages per group (read once per group), counting those this claim takes.
local held, taken_groups = {}, {}
-- The per-group rate limit's state for this claim (nil without one, or without grouped messages).
local rates = grouped and group_rates_begin(conf[7], now) or nil
local function held_of(group)
  local h = held[group] or tonumber(redis.call('HGET', K.group_held, group)) or 0
  held[group] = h
  return h
end
local function add(id, class, group)
  if group then
    held[group] = held_of(group) + 1
    taken_groups[group] = (taken_groups[group] or 0) + 1
    if rates then group_rate_charge(rates, group) end
  end
  n = n + 1
  ids[n] = id
  class_at[n] = class
end
-- Pops up to `want` from a lane; returns how many it popped. A message of a full group is parked, and one
-- of a group whose next start has not come.
local function take(lane, class, want)
  local popped = redis.call('RPOP', ready_list(lane), want)
  if not popped then return 0 end
  if not grouped then
    for _, id in ipairs(popped) do
      n = n + 1
      ids[n] = id
      class_at[n] = class
    end
    return #popped
  end
  local groups = hmget(K.groups, popped)
  for i, id in ipairs(popped) do
    local group = groups[i]
    if not group then
      add(id, class, nil)
    elseif rates and not group_rate_due(rates, group) then
      group_rate_park(rates, group, id)
    elseif group_max and held_of(group) >= group_max then
      park(group, id)
    else
      add(id, class, group)
    end
  end
  return #popped
end
-- Takes from a lane until the claim is full (true) or the lane is empty (false).
local function drain(lane, class)
  while n < max do
    local want = max - n
    if take(lane, class, want) < want then return false end
  end
  return true
end

-- Groups whose parked messages waited for their rate and whose time came: the next of each, before the
-- lanes (it was ahead of what they hold). A full group stops waiting: its next release unparks it.
if rates then
  local function accepts(class)
    return accept_all or accepted[class] == true
  end
  for _, group in ipairs(due_waits(rates, max + 10)) do
    if n >= max then break end
    if not group_rate_due(rates, group) then
      rewait(rates, group)
    elseif group_max and held_of(group) >= group_max then
      redis.call('ZREM', K.group_waits, group)
    else
      local id, class = take_parked(group, accepts)
      if id then add(id, class, group) end
    end
  end
end

-- Priority 0 first: the classes in turn from a rotating start, so no class waits behind another for good.
local start = now % math.max(1, #lists)
for k = 0, #lists - 1 do
  if n >= max then break end
  local class = lists[(start + k) % #lists + 1]
  drain(class, class)
end
-- Then the lanes of lower priorities, in priority order; `lanes` names only lanes that held messages,
-- so no message of a lower priority is read to find one of a higher. Emptied lanes leave it.
if n < max and has_lanes then
  local emptied, from = {}, 0
  while n < max do
    local page = redis.call('ZRANGE', K.lanes, from, from + 99)
    for _, lane in ipairs(page) do
      if n >= max then break end
      local class = lane_parts(lane)
      if (accept_all or accepted[class]) and not drain(lane, class) then emptied[#emptied + 1] = lane end
    end
    if #page < 100 then break end
    from = from + 100
  end
  if #emptied > 0 then redis.call('ZREM', K.lanes, unpack(emptied)) end
end

local reply = { 'ok', 0, 0, -1 }
if n > 0 then
  local m
  m, locked_until = hold(consumer, ids, class_at, n, lock_ms, now, reply)
  if m == 0 then locked_until = nil end
  for group, count in pairs(taken_groups) do redis.call('HINCRBY', K.group_held, group, count) end
  if rate_start and m > 0 then
    redis.call('SET', K.rate_tat, string.format('%.3f', rate_start + m * rate_interval))
  end
end
-- When the first group waiting for its rate may start its next message (nil: none waits).
local waits_until = nil
if rates then
  group_rates_end(rates)
  waits_until = next_wait(rates)
end

-- Whether the accepted lanes are empty now: fewer than asked were there, or as many and none left (read
-- for a few plain lanes only; with more, or lanes of lower priorities, the worker just claims again).
local function drained()
  if n < max then return true end
  if has_lanes or #lists > MAX_DRAINED_READS then return false end
  for _, lane in ipairs(lists) do
    if redis.call('LLEN', ready_list(lane)) > 0 then return false end
  end
  return true
end

-- When looking again is worthwhile without a wake-up: after `ttl` ms, or when a backoff or lock ends.
local function wake_after(ttl)
  if more then return now end
  local wake_at = now + ttl
  local firsts = { heads.schedule, heads.expiry, locked_until, waits_until }
  if promoted then firsts = { head(K.schedule), head(K.lock_expiry), nil, waits_until } end
  for i = 1, 4 do
    if firsts[i] ~= nil then wake_at = math.min(wake_at, firsts[i]) end
  end
  return wake_at
end

-- A claim that took nothing because its worker's slots wait for messages handed to it is no dry run.
if #reply > 4 or on_the_way > 0 then
  reset_dry_runs(marks[2])
  -- The accepted lanes ran dry, so a claim now would find nothing: the worker waits for a wake-up instead,
  -- or until a dry run (the first: the runs were just reset) would have said to look.
  if drained() then
    reply[4] = wake_after(tonumber(ARGV[5]))
  elseif #reply == 4 then
    -- Every free slot waits for messages on their way: they wake the worker when they arrive, or, lost with
    -- a connection, stop being owed after a lock.
    reply[4] = math.min(tonumber(owed_until) or now + lock_ms, now + PARK_MS)
  end
elseif waits_until then
  -- Only messages of groups waiting for their rate are left: no dry run; look again at the first one's time.
  reply[3] = tonumber(marks[2]) or 0
  reply[4] = wake_after(waits_until - now)
else
  local ttl = redis.call('PTTL', K.eoq_backoff)
  local dry
  if ttl <= 0 then
    dry = redis.call('INCR', K.ndry_runs)
    ttl = tonumber(ARGV[4 + math.min(5, dry)])
    if ttl > 0 then redis.call('SET', K.eoq_backoff, '1', 'PX', ttl) else redis.call('DEL', K.eoq_backoff) end
  else
    dry = tonumber(marks[2]) or 0
  end
  reply[3] = dry
  reply[4] = wake_after(ttl)
end
-- Free slots and nothing left to take: enqueues hand this worker their messages until it claims again.
local free = max - (#reply - 4) / 6
if token and accept_all and not grouped and not rate_start and free > 0 and reply[4] > now then
  reply[4] = park_worker(consumer, free, lock_ms, now, reply[4], parked_any, token, on_the_way, owed_until)
elseif token and on_the_way > 0 then
  -- Not parked, yet messages handed to it are still on their way: its next claim must know (lib/handoff.lua).
  park_worker(consumer, 0, lock_ms, now, now + PARK_MS, parked_any, token, on_the_way, owed_until)
end
reply[2] = queue_size()
events_flush(now)
return reply
