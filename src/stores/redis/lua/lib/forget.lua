-- forget: removes every trace of a message from the queue's hashes, sets and
-- sorted sets (not from a ready list: the caller knows whether it is in one).
--
-- KEYS: messages metadata filters policies history losses nattempts locks holders backoffs outcomes
--       enqueued-at updated-at requeue-content done requeue schedule lock-expiry requeue-locks
--       requeue-schedule done-at dedupe failed priorities groups debounce debounce-of progress logs results
--       parent owes children children-left waiting-children

local FORGET_HASHES = { 'messages', 'metadata', 'filters', 'policies', 'history', 'losses', 'nattempts', 'locks',
  'holders', 'backoffs', 'outcomes', 'enqueued_at', 'updated_at', 'requeue_content', 'priorities', 'groups',
  'progress', 'logs', 'results', 'parent', 'owes', 'children', 'children_left' }
local FORGET_ZSETS = { 'schedule', 'lock_expiry', 'requeue_locks', 'requeue_schedule', 'done_at', 'dedupe', 'failed',
  'waiting_children' }

-- Whether the queue has a debounce index at all (read once per script), so plain queues pay nothing.
local has_debounce = nil
local function reset_forget()
  has_debounce = nil
end

-- With `w`, the removals are queued there (many ids in one command per key); else made now.
local function forget(id, w)
  for _, name in ipairs(FORGET_HASHES) do
    if w then later(w, 'hdel', K[name], id) else redis.call('HDEL', K[name], id) end
  end
  for _, name in ipairs(FORGET_ZSETS) do
    if w then later(w, 'zrem', K[name], id) else redis.call('ZREM', K[name], id) end
  end
  for _, name in ipairs({ 'done', 'requeue' }) do
    if w then later(w, 'srem', K[name], id) else redis.call('SREM', K[name], id) end
  end
  if has_debounce == nil then has_debounce = redis.call('EXISTS', K.debounce_of) == 1 end
  local did = has_debounce and redis.call('HGET', K.debounce_of, id)
  if did then
    redis.call('HDEL', K.debounce_of, id)
    if redis.call('HGET', K.debounce, did) == id then redis.call('HDEL', K.debounce, did) end
  end
end
