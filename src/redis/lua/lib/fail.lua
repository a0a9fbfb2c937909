-- fail: a message's last run ended in a final error: it becomes failed. Also
-- the history of attempts.
--
-- KEYS: messages metadata filters policies history outcomes updated-at locks holders lock-expiry
--       backoffs schedule requeue requeue-locks requeue-content failed

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

-- Ends the message's run with `outcome` (the outcomes field: 'error', a newline, the error): failed.
-- The caller has recorded the failing attempt in the history.
local function fail(id, now, outcome)
  check_rare()
  for _, key in ipairs({ K.locks, K.holders, K.backoffs, K.requeue_content }) do redis.call('HDEL', key, id) end
  for _, key in ipairs({ K.lock_expiry, K.schedule, K.requeue_locks }) do redis.call('ZREM', key, id) end
  redis.call('SREM', K.requeue, id)
  redis.call('HSET', K.outcomes, id, outcome)
  redis.call('HSET', K.updated_at, id, now)
  redis.call('ZADD', K.failed, now, id)
end
