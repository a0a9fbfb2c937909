-- fail: a message's last run ended in a final error: it becomes failed, or
-- moves to the queue's dead-letter queue (which writes its own `enqueued` event when it has events on;
-- the caller writes the `failed` one). Also the history of attempts. Scripts include events before it.
--
-- KEYS: messages metadata filters policies history outcomes updated-at locks holders lock-expiry
--       backoffs schedule requeue requeue-locks requeue-content failed conf priorities groups progress logs

-- Attempt records kept per message (model/history.ts HISTORY_LIMIT).
local HISTORY_LIMIT = 10

-- Appends an attempt record (a table; absent fields are written as null) to the message's history.
local function append_history(id, attempt, started, now, consumer, outcome, err)
  check_rare()
  local history = {}
  local stored = redis.call('HGET', K.history, id)
  if stored then
    local ok, value = pcall(cjson.decode, stored)
    if ok and type(value) == 'table' then history = value end
  end
  history[#history + 1] = {
    attempt = tonumber(attempt) or 0,
    startedAt = started or cjson.null,
    endedAt = now,
    consumer = consumer or cjson.null,
    outcome = outcome,
    error = err or cjson.null,
  }
  while #history > HISTORY_LIMIT do table.remove(history, 1) end
  redis.call('HSET', K.history, id, cjson.encode(history))
end

-- The keys of the dead-letter queue `name`: same prefix, its own hash tag (so never on a cluster:
-- configure refuses a dead-letter queue there).
local function dead_letter_key(name, key)
  local prefix = string.match(K.conf, '^([^{]*):{')
  return prefix .. ':{' .. name .. '}:' .. key
end

-- Moves the message to the dead-letter queue `dlq`, queued there at attempt 0; false when the id is taken there.
local function dead_letter(id, dlq, now)
  local dk = function(key) return dead_letter_key(dlq, key) end
  local class = redis.call('HGET', K.filters, id) or ''
  local priority = redis.call('HGET', K.priorities, id)
  -- The message keeps its priority and group there (see ready_list in common).
  local lane = lane_for(class, priority)
  local list = dk('mid-circle')
  if lane ~= '' then
    if string.byte(lane, 1) == 64 then list = list .. lane else list = list .. ':' .. lane end
  end
  local hashes = { 'messages', 'metadata', 'filters', 'policies', 'history', 'outcomes', 'enqueued-at', 'updated-at',
    'pushes', 'priorities', 'groups', 'progress', 'logs', 'parent' }
  for _, key in ipairs(hashes) do check_type(dk(key), 'hash') end
  check_type(dk('classes'), 'set')
  check_type(dk('lanes'), 'zset')
  check_type(list, 'list')
  check_type(dk('conf'), 'hash')
  -- The dead-letter queue's own events: an `enqueued` there when its configuration has them on.
  local events = redis.call('HMGET', dk('conf'), 'events', 'events_max_count')
  if events[1] == '1' then
    check_type(dk('events'), 'stream')
    check_type(dk('events-seq'), 'string')
  end
  if redis.call('HEXISTS', dk('messages'), id) == 1 then return false end
  for _, pair in ipairs({ { 'messages', K.messages }, { 'metadata', K.metadata }, { 'policies', K.policies },
    { 'history', K.history }, { 'outcomes', K.outcomes }, { 'priorities', K.priorities }, { 'groups', K.groups },
    { 'progress', K.progress }, { 'logs', K.logs } }) do
    local value = redis.call('HGET', pair[2], id)
    if value then redis.call('HSET', dk(pair[1]), id, value) end
  end
  if class ~= '' then
    redis.call('HSET', dk('filters'), id, class)
    redis.call('SADD', dk('classes'), class)
  end
  redis.call('HSET', dk('enqueued-at'), id, now)
  redis.call('LPUSH', list, id)
  redis.call('HINCRBY', dk('pushes'), lane, 1)
  if lane ~= class then
    redis.call('ZADD', dk('lanes'), tonumber(priority), lane)
  end
  redis.call('PUBLISH', dk('wake'), 'dead-letter')
  if events[1] == '1' then
    append_events(dk('events'), dk('events-seq'), dk('events-wake'), tonumber(events[2]) or DEFAULT_EVENTS_MAX_COUNT,
      now, { 'enqueued 0 ' .. id })
  end
  return true
end

-- Ends the message's run with `outcome` (the outcomes field: 'error', a newline, the error): failed,
-- or dead-lettered. The caller has recorded the failing attempt in the history.
local function fail(id, now, outcome)
  check_rare()
  -- A flow's child ends for its parent here, before it moves (lib/flows.lua).
  flow_child_end(flow_queue(), id, true, string.match(outcome, '^[^\n]*\n(.*)$'), now)
  for _, key in ipairs({ K.locks, K.holders, K.backoffs, K.requeue_content }) do redis.call('HDEL', key, id) end
  for _, key in ipairs({ K.lock_expiry, K.schedule, K.requeue_locks }) do redis.call('ZREM', key, id) end
  redis.call('SREM', K.requeue, id)
  redis.call('HSET', K.outcomes, id, outcome)
  redis.call('HSET', K.updated_at, id, now)
  local dlq = redis.call('HGET', K.conf, 'dead_letter_queue')
  if dlq and dlq ~= '' and dead_letter(id, dlq, now) then
    flow_child_moved(flow_queue(), id, dlq)
    forget(id)
    return
  end
  redis.call('ZADD', K.failed, now, id)
end
