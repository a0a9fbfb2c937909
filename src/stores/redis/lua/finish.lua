#!lua flags=allow-oom
-- finish: records handler outcomes. Only the consumer holding a message, for
-- the attempt it was handed, may finish it; anything else is 'lost' (the lock
-- expired and another took it, or the queue was cleared). A message marked for
-- requeue runs again as a new run (attempt 0, the replacement payload if one was
-- given): at once, or as done-with-requeue until the outcome's backoff ends.
-- Otherwise an error is final: the message fails (or moves to the dead-letter
-- queue). An error or retry of an attempt that ran is recorded in the history.
-- Each stored outcome writes its event (events on): completed, failed, or retrying unless the
-- message never ran (a give-back).
-- Runs when Redis is out of memory (allow-oom): draining the queue is how memory comes back.
--
-- KEYS: messages filters nattempts locks holders backoffs done done-at dedupe requeue
--       requeue-content schedule lock-expiry outcomes updated-at mid-circle wake pushes losses layout results owes
-- ARGV: consumer id, the number P of plain successes (no backoff, no error), two per plain success: id,
--       attempt; then eight per other finish: id, attempt, outcome ('success', 'error' or 'retry'),
--       backoff ms, error ('-' for none, else '+' and the text), started at ms ('' when it never ran),
--       the error as the history keeps it ('' when it is the error itself, else '+' and the text), the
--       success's result ('' for none, else encoding tag + bytes), its completed event's text when the result
--       is bytes (base64: and their base64; '' otherwise: a JSON result's event has its JSON text)
-- Reply: one string per finish, in the order of ARGV: 'ok' or 'lost'
-- Include: common events lanes groups forget flows fail

local PER = 9
-- Whether messages of the queue may owe a flow's parent a count: its mark says so (an unmarked queue looks).
local layout_ok, flows = layout_marked()
-- A batch of plain successes touches none of these (errors, retries, requeues and backoffs call check_rare). It reads
-- holders, nattempts and requeue before its first write.
check_layout(nil, { 'history', 'losses', 'failed', 'conf', 'requeue_locks', 'requeue_schedule', 'requeue_content',
  'metadata', 'policies', 'enqueued_at', 'schedule', 'mid_circle', 'filters', 'pushes', 'priorities', 'lanes', 'groups',
  'debounce', 'debounce_of', 'group_held', 'parked', 'messages', 'dedupe' }, { 'holders', 'nattempts', 'requeue', 'owes' },
  layout_ok)
if not layout_ok then flows = redis.call('EXISTS', K.owes) == 1 end
local consumer = ARGV[1]
-- Plain successes come as id and attempt only: most finishes are, and each argument costs the server.
local plain = tonumber(ARGV[2])
local REST = 3 + 2 * plain
local count = plain + (#ARGV - REST + 1) / PER
if count == 0 then return {} end
local now = now_ms()
local now_s = num_str(now)
-- Where finish k's fields start in ARGV, and its attempt.
local function base_of(k)
  if k <= plain then return 1 + 2 * k end
  return REST + (k - plain - 1) * PER
end
local ids, attempts_in = {}, {}
for k = 1, count do
  local base = base_of(k)
  ids[k], attempts_in[k] = ARGV[base], ARGV[base + 1]
end
local holders = hmget(K.holders, ids)
-- Whether finish k's consumer still holds its message, at the attempt it was handed.
local held = {}
for k, id in ipairs(ids) do held[k] = holds(holders[k], consumer, attempts_in[k], id) end
-- The parents the messages owe a count (read before any write: a foreign `owes` fails here).
local owing = flows and hmget(K.owes, ids) or nil
local marked = {}
if redis.call('SCARD', K.requeue) > 0 then
  for k, id in ipairs(ids) do
    marked[k] = redis.call('SISMEMBER', K.requeue, id) == 1
    if marked[k] then check_rare() end
  end
end
for k = plain + 1, count do
  local base = base_of(k)
  if ARGV[base + 2] ~= 'success' or tonumber(ARGV[base + 3]) > 0 then check_rare() end
end
events_begin()

-- A new run with the payload given at requeue time, if one was.
local function take_replacement(id)
  local content = redis.call('HGET', K.requeue_content, id)
  if content then
    redis.call('HSET', K.messages, id, content)
    redis.call('HDEL', K.requeue_content, id)
  end
end

-- The common writes go in one command each; the rarer outcomes through `w`.
local w = pending_writes()
local ready = pending_ready()
-- A message that ends up done keeps its finish time in done-at, which status reads as its update time:
-- only those that run again take an updated-at stamp (a failure's is written by fail).
local unlocked, outcomes, cleared, stamps, done, done_at, dedupe, results = {}, {}, {}, {}, {}, {}, {}, {}
-- Successes that end a flow's child: its parent counts them.
local ended = {}
local replies = {}
local woke = false
local seen = {}
-- A grouped message letting go makes room in its group: parked messages of it go back to their lanes.
-- Done first: a dead-letter move (fail) forgets the message's group.
if redis.call('EXISTS', K.group_held) == 1 then
  local letting_go = {}
  for k, id in ipairs(ids) do
    if held[k] and not seen[id] then
      seen[id] = true
      letting_go[#letting_go + 1] = id
    end
  end
  seen = {}
  if #letting_go > 0 and release_groups(letting_go, ready) > 0 then woke = true end
end
for k, id in ipairs(ids) do
  local attempt, outcome, backoff, err, started, tail, result, told = attempts_in[k], 'success', 0, '-', '', '', '', ''
  if k > plain then
    local base = base_of(k)
    outcome, backoff, err = ARGV[base + 2], tonumber(ARGV[base + 3]), ARGV[base + 4]
    started, tail, result, told = ARGV[base + 5], ARGV[base + 6], ARGV[base + 7], ARGV[base + 8]
  end
  if not held[k] or seen[id] then
    replies[k] = 'lost'
  else
    seen[id] = true
    replies[k] = 'ok'
    unlocked[#unlocked + 1] = id
    local stored = outcome
    if err ~= '-' then stored = outcome .. '\n' .. string.sub(err, 2) end
    local kept = nil
    if outcome ~= 'success' then
      if tail ~= '' then kept = string.sub(tail, 2) elseif err ~= '-' then kept = string.sub(err, 2) end
      if started ~= '' then append_history(id, attempt, tonumber(started), now, consumer, outcome, kept) end
    end
    if EV.on then
      if outcome == 'success' then
        -- The result whole, as src/model/events.ts resultEventText writes it.
        if told == '' and result ~= '' then told = string.sub(result, 2) end
        event('completed', id, attempt, told ~= '' and told or nil)
      elseif outcome == 'error' then
        event('failed', id, attempt, kept)
      elseif started ~= '' then
        event('retrying', id, attempt, kept)
      end
    end
    if outcome == 'error' and not marked[k] then
      fail(id, now, stored)
    elseif stored == 'success' and not marked[k] then
      -- A done message without an outcome reads as a success (lib/status.lua): only an earlier retry's is deleted.
      cleared[#cleared + 1] = id
    else
      local n = #outcomes
      outcomes[n + 1], outcomes[n + 2] = id, stored
    end
    if outcome == 'retry' then
      stamps[#stamps + 1], stamps[#stamps + 2] = id, now_s
      -- A retry runs again anyway: a requeue mark is used up by it.
      if marked[k] then
        take_replacement(id)
        later(w, 'srem', K.requeue, id)
        later(w, 'zrem', K.requeue_locks, id)
      end
      if backoff > 0 then
        later(w, 'hset', K.backoffs, id, now + backoff)
        later(w, 'zadd', K.schedule, now + backoff, id)
      else
        push_ready(ready, lane_of(id), id, false)
      end
      woke = true
    elseif marked[k] then
      -- The requeue wins over any outcome: a new run, without a result.
      take_replacement(id)
      later(w, 'hdel', K.results, id)
      later(w, 'hdel', K.nattempts, id)
      later(w, 'hdel', K.losses, id)
      later(w, 'zrem', K.requeue_locks, id)
      if backoff > 0 and outcome ~= 'error' then
        -- done-with-requeue: done, still marked, queued again when the backoff ends.
        done[#done + 1] = id
        done_at[#done_at + 1], done_at[#done_at + 2] = now_s, id
        later(w, 'hset', K.backoffs, id, now + backoff)
        later(w, 'zadd', K.schedule, now + backoff, id)
        later(w, 'zadd', K.requeue_schedule, now + backoff, id)
      else
        stamps[#stamps + 1], stamps[#stamps + 2] = id, now_s
        later(w, 'srem', K.requeue, id)
        push_ready(ready, lane_of(id), id, false)
      end
      woke = true
    elseif outcome == 'success' then
      if owing and owing[k] then ended[#ended + 1] = id end
      done[#done + 1] = id
      done_at[#done_at + 1], done_at[#done_at + 2] = now_s, id
      if result ~= '' then results[#results + 1], results[#results + 2] = id, result end
      -- Only a backoff needs a dedupe entry (done-with-backoff, by its end): list reads done-awaiting-gc
      -- from done-at, and one sorted-set insert less is most of what a plain success saves.
      if backoff > 0 then
        dedupe[#dedupe + 1], dedupe[#dedupe + 2] = num_str(now + backoff), id
        later(w, 'hset', K.backoffs, id, now + backoff)
      end
    end
  end
end

if #unlocked > 0 then
  call_chunked('HDEL', K.locks, unlocked)
  call_chunked('HDEL', K.holders, unlocked)
  call_chunked('ZREM', K.lock_expiry, unlocked)
end
if #outcomes > 0 then call_chunked('HSET', K.outcomes, outcomes) end
if #cleared > 0 then call_chunked('HDEL', K.outcomes, cleared) end
if #stamps > 0 then call_chunked('HSET', K.updated_at, stamps) end
if #done > 0 then
  call_chunked('SADD', K.done, done)
  call_chunked('ZADD', K.done_at, done_at)
end
if #dedupe > 0 then call_chunked('ZADD', K.dedupe, dedupe) end
if #results > 0 then call_chunked('HSET', K.results, results) end
flush_writes(w)
flush_ready(ready)
for _, id in ipairs(ended) do flow_child_end(flow_queue(), id, false, nil, now) end
events_flush(now)
if woke then redis.call('PUBLISH', K.wake, 'finish') end
return replies
