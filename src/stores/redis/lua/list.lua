#!lua flags=allow-oom
-- list: a page of messages in the wanted states, read from the indexes, never
-- a walk of the queue. Within a state, oldest first by the index's time:
--   queued               the ready lists in claim order (by priority, then '' and the filter classes in byte
--                        order), then the groups' parked lists, next out first;
--                        due backoffs and expired locks are first moved there, as a claim would
--   queued-with-backoff  schedule after now (done-with-requeue entries, also there, are skipped)
--   locked               lock-expiry after now (locked-with-requeue entries skipped)
--   locked-with-requeue  requeue-locks after now
--   done-awaiting-gc     done-at, by finish time (done-with-backoff, done-with-requeue and due requeues skipped:
--                        a success without backoff has no dedupe entry)
--   done-with-backoff    dedupe after now
--   done-with-requeue    requeue-schedule after now
--   failed               failed
--   waiting-children     waiting-children, by the time each may run once its children have ended
-- A position is the state and three strings: (score, id, '') in a sorted set; in a ready list
-- (class, index from the back, the list's back pushes then), so pushes between pages shift it exactly.
-- Runs when Redis is out of memory (allow-oom): it may move due messages, never adds any.
--
-- KEYS: messages metadata filters classes pushes mid-circle schedule lock-expiry requeue-locks
--       requeue-schedule done-at dedupe failed lanes parked results waiting-children
-- ARGV: states (comma-separated, in MESSAGE_STATES order), outcome ('' for any), limit, messages to look at
--       at most, '1' to include content, then the position to go on from: state ('' to start), a, b, c
-- Reply: { 'end' when the listing is over, else 'more', then the position of the last message looked at
--        (state, a, b, c), then per message: id, the seven fields of `status`, and with content: content,
--        metadata JSON or nil, filter class or nil, result or nil }
-- Include: common events state status lanes groups forget flows fail promote

check_layout()
events_begin()
local states = {}
for state in string.gmatch(ARGV[1], '[^,]+') do states[#states + 1] = state end
local outcome, limit, budget, with_content = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
local from_state = ARGV[6]
local now = now_ms()
-- Entries read per command.
local STEP = 100

-- a after b, comparing bytes (as Redis orders members of equal score), whatever the locale.
local function after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

local reply = { 'end', '', '', '', '' }
local listed, looked = 0, 0
local position = nil

-- Looks at one index entry; returns false when the call has done enough.
local function look(id, state, a, b, c)
  looked = looked + 1
  position = { state, a, b, c }
  local status = status_of(id, now)
  local last = status and status[3]
  if status and status[1] == state and (outcome == '' or (last and (last == outcome or
      string.sub(last, 1, #outcome + 1) == outcome .. '\n'))) then
    reply[#reply + 1] = id
    for i = 1, 7 do reply[#reply + 1] = status[i] end
    if with_content then
      for _, key in ipairs({ K.messages, K.metadata, K.filters, K.results }) do
        reply[#reply + 1] = redis.call('HGET', key, id)
      end
    end
    listed = listed + 1
  end
  return listed < limit and looked < budget
end

-- The rank just after (score, id) in a sorted set, even when id has left it since.
local function rank_after(key, score, id)
  local current = redis.call('ZSCORE', key, id)
  if current and tonumber(current) == tonumber(score) then return redis.call('ZRANK', key, id) + 1 end
  -- Ranks lo..hi-1 hold `score`, members in byte order: the first one after id.
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', key, '-inf', score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if after(redis.call('ZRANGE', key, mid, mid)[1], id) then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- state → sorted set, and its range: 'after' now, or 'all'.
local SORTED = {
  ['queued-with-backoff'] = { K.schedule, 'after' },
  locked = { K.lock_expiry, 'after' },
  ['locked-with-requeue'] = { K.requeue_locks, 'after' },
  ['done-awaiting-gc'] = { K.done_at, 'all' },
  ['done-with-backoff'] = { K.dedupe, 'after' },
  ['done-with-requeue'] = { K.requeue_schedule, 'after' },
  failed = { K.failed, 'all' },
  ['waiting-children'] = { K.waiting_children, 'all' },
}

-- done-at also holds the finished messages whose backoff lasts (done-with-backoff, done-with-requeue): one
-- HMGET of backoffs per step passes them at under a µs each instead of a status each (about 7 µs), for queues
-- whose successes mostly carry a backoff. A pass counts as this part of a look (exact in binary).
local PASS = 0.25

-- Whether entry i of a step (its backoff end in `backoffs`, if read) is a done message still in a backoff.
local function in_backoff(backoffs, i)
  return backoffs ~= nil and (tonumber(backoffs[(i + 1) / 2]) or 0) > now
end

-- Returns true when the state's entries are all looked at.
local function list_sorted(state, score, id)
  local key, range = SORTED[state][1], SORTED[state][2]
  local rank = 0
  if range == 'after' then rank = redis.call('ZCOUNT', key, '-inf', now) end
  if score then rank = math.max(rank, rank_after(key, score, id)) end
  while true do
    local entries = redis.call('ZRANGE', key, rank, rank + STEP - 1, 'WITHSCORES')
    if #entries == 0 then return true end
    local backoffs = nil
    if state == 'done-awaiting-gc' then
      local ids = {}
      for i = 1, #entries, 2 do ids[#ids + 1] = entries[i] end
      backoffs = hmget(K.backoffs, ids)
    end
    for i = 1, #entries, 2 do
      if in_backoff(backoffs, i) then
        looked = looked + PASS
        position = { state, entries[i + 1], entries[i], '' }
        if looked >= budget then return false end
      elseif not look(entries[i], state, entries[i + 1], entries[i], '') then
        return false
      end
    end
    rank = rank + #entries / 2
  end
end

-- A lane's place in the listing: claim order (priority, then class in byte order), parked lists last.
local function lane_key(lane)
  if string.byte(lane, 1) == 35 then return 1, 0, string.sub(lane, 2) end
  local class, priority = lane_parts(lane)
  return 0, priority, class
end
local function lane_before(a, b)
  local ka, pa, na = lane_key(a)
  local kb, pb, nb = lane_key(b)
  if ka ~= kb then return ka < kb end
  if pa ~= pb then return pa < pb end
  return after(nb, na)
end

-- Returns true when every ready list (and every group's parked list) is looked at.
local function list_ready(from_class, from_index, from_pushes)
  local lanes = redis.call('SMEMBERS', K.classes)
  lanes[#lanes + 1] = ''
  for _, lane in ipairs(redis.call('ZRANGE', K.lanes, 0, -1)) do lanes[#lanes + 1] = lane end
  for _, group in ipairs(redis.call('SMEMBERS', K.parked)) do lanes[#lanes + 1] = '#' .. group end
  table.sort(lanes, lane_before)
  for _, class in ipairs(lanes) do
    if from_class == nil or class == from_class or lane_before(from_class, class) then
      local list = ready_list(class)
      local pushes = tonumber(redis.call('HGET', K.pushes, class)) or 0
      local index = redis.call('LLEN', list) - 1
      if class == from_class then
        index = math.min(index, tonumber(from_index) + pushes - tonumber(from_pushes) - 1)
      end
      while index >= 0 do
        local first = math.max(0, index - STEP + 1)
        local ids = redis.call('LRANGE', list, first, index)
        for i = #ids, 1, -1 do
          if not look(ids[i], 'queued', class, tostring(first + i - 1), tostring(pushes)) then return false end
        end
        index = first - 1
      end
    end
  end
  return true
end

local resuming = from_state ~= ''
for _, state in ipairs(states) do
  if not resuming or state == from_state then
    local a, b, c = nil, nil, nil
    if resuming then a, b, c = ARGV[7], ARGV[8], ARGV[9] end
    local over
    if state == 'queued' then
      -- Due backoffs and expired locks join the ready lists first, as at a claim.
      for _ = 1, 10 do
        local w, ready = pending_writes(), pending_ready()
        local more = promote(now, ready, w)
        flush_writes(w)
        flush_ready(ready)
        events_flush(now)
        if not more then break end
      end
      over = list_ready(a, b, c)
    else
      over = list_sorted(state, a, b)
    end
    resuming = false
    if not over then
      reply[1] = 'more'
      for i = 1, 4 do reply[i + 1] = position[i] end
      return reply
    end
  end
end
return reply
