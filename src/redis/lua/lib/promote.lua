-- promote: moves messages whose wait is over back to their ready lists, at the
-- front (they waited longest): pending messages whose backoff ended, requeues
-- whose done backoff ended (a new run: out of done), and locked messages whose
-- lock expired (their holder stalled or died; attempt and requeue mark stay).
--
-- KEYS: schedule lock-expiry backoffs locks holders done done-at requeue filters

-- Per call at most this many of each, so a script stays short; the caller looks again at once.
local PROMOTE_LIMIT = 1000

local function class_of(id)
  return redis.call('HGET', K.filters, id) or ''
end

-- Returns true when more may be due than were moved.
local function promote(now, ready, w)
  local due = redis.call('ZRANGEBYSCORE', K.schedule, '-inf', now, 'LIMIT', 0, PROMOTE_LIMIT)
  for _, id in ipairs(due) do
    if redis.call('SISMEMBER', K.done, id) == 1 then
      later(w, 'srem', K.done, id)
      later(w, 'srem', K.requeue, id)
      later(w, 'zrem', K.done_at, id)
    end
    later(w, 'hdel', K.backoffs, id)
    later(w, 'zrem', K.schedule, id)
    push_ready(ready, class_of(id), id, true)
  end
  local expired = redis.call('ZRANGEBYSCORE', K.lock_expiry, '-inf', now, 'LIMIT', 0, PROMOTE_LIMIT)
  for _, id in ipairs(expired) do
    later(w, 'hdel', K.locks, id)
    later(w, 'hdel', K.holders, id)
    later(w, 'zrem', K.lock_expiry, id)
    push_ready(ready, class_of(id), id, true)
  end
  return #due == PROMOTE_LIMIT or #expired == PROMOTE_LIMIT
end
