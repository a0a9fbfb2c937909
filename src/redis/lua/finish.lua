#!lua flags=allow-oom
-- finish: records handler outcomes. Only the consumer holding a message, for
-- the attempt it was handed, may finish it; anything else is 'lost' (the lock
-- expired and another took it, or the queue was cleared). A message marked for
-- requeue runs again as a new run (attempt 0, the replacement payload if one was
-- given): at once, or as done-with-requeue until the outcome's backoff ends.
-- Runs when Redis is out of memory (allow-oom): draining the queue is how memory comes back.
--
-- KEYS: messages filters nattempts locks holders backoffs done done-at dedupe requeue
--       requeue-content schedule lock-expiry outcomes updated-at mid-circle wake
-- ARGV: consumer id, then five per finish: id, attempt, outcome ('success', 'error' or 'retry'),
--       backoff ms, error ('-' for none, else '+' and the text)
-- Reply: one string per finish: 'ok' or 'lost'
-- Include: common

check_layout()
local consumer = ARGV[1]
local count = (#ARGV - 1) / 5
if count == 0 then return {} end
local now = now_ms()
local ids = {}
for k = 1, count do ids[k] = ARGV[2 + (k - 1) * 5] end
local holders = hmget(K.holders, ids)
local attempts = hmget(K.nattempts, ids)
local marked = {}
if redis.call('SCARD', K.requeue) > 0 then
  for k, id in ipairs(ids) do marked[k] = redis.call('SISMEMBER', K.requeue, id) == 1 end
end

local function class_of(id)
  return redis.call('HGET', K.filters, id) or ''
end

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
local unlocked, outcomes, stamps, done, done_at = {}, {}, {}, {}, {}
local replies = {}
local woke = false
local seen = {}
for k, id in ipairs(ids) do
  local base = 2 + (k - 1) * 5
  local attempt, outcome, backoff, err = ARGV[base + 1], ARGV[base + 2], tonumber(ARGV[base + 3]), ARGV[base + 4]
  if holders[k] ~= consumer or attempts[k] ~= attempt or seen[id] then
    replies[k] = 'lost'
  else
    seen[id] = true
    replies[k] = 'ok'
    unlocked[#unlocked + 1] = id
    local n = #stamps
    stamps[n + 1], stamps[n + 2] = id, now
    if err == '-' then
      outcomes[n + 1], outcomes[n + 2] = id, outcome
    else
      outcomes[n + 1], outcomes[n + 2] = id, outcome .. '\n' .. string.sub(err, 2)
    end
    if outcome == 'retry' then
      -- A retry runs again anyway: a requeue mark is used up by it.
      if marked[k] then
        take_replacement(id)
        later(w, 'srem', K.requeue, id)
      end
      if backoff > 0 then
        later(w, 'hset', K.backoffs, id, now + backoff)
        later(w, 'zadd', K.schedule, now + backoff, id)
      else
        push_ready(ready, class_of(id), id, false)
      end
      woke = true
    elseif marked[k] then
      take_replacement(id)
      later(w, 'hdel', K.nattempts, id)
      if backoff > 0 then
        -- done-with-requeue: done, still marked, queued again when the backoff ends.
        done[#done + 1] = id
        done_at[#done_at + 1], done_at[#done_at + 2] = now, id
        later(w, 'hset', K.backoffs, id, now + backoff)
        later(w, 'zadd', K.schedule, now + backoff, id)
      else
        later(w, 'srem', K.requeue, id)
        push_ready(ready, class_of(id), id, false)
      end
      woke = true
    else
      done[#done + 1] = id
      done_at[#done_at + 1], done_at[#done_at + 2] = now, id
      if backoff > 0 then
        later(w, 'hset', K.backoffs, id, now + backoff)
        later(w, 'zadd', K.dedupe, now + backoff, id)
      end
    end
  end
end

if #unlocked > 0 then
  call_chunked('HDEL', K.locks, unlocked)
  call_chunked('HDEL', K.holders, unlocked)
  call_chunked('ZREM', K.lock_expiry, unlocked)
  call_chunked('HSET', K.outcomes, outcomes)
  call_chunked('HSET', K.updated_at, stamps)
end
if #done > 0 then
  call_chunked('SADD', K.done, done)
  call_chunked('ZADD', K.done_at, done_at)
end
flush_writes(w)
flush_ready(ready)
if woke then redis.call('PUBLISH', K.wake, 'finish') end
return replies
