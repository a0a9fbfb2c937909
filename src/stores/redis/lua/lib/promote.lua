-- promote: moves messages whose wait is over back to their ready lists, at the
-- front (they waited longest): pending messages whose backoff ended, requeues
-- whose done backoff ended (a new run: out of done), and locked messages whose
-- lock expired (their holder stalled or died; attempt and requeue mark stay).
-- An expired lock is a lost delivery: counted in `losses` and recorded in the
-- history; at the queue's maxDeliveries the message fails instead (a `failed` event; the caller
-- has called events_begin).
--
-- KEYS: schedule lock-expiry backoffs locks holders done done-at requeue filters requeue-schedule
--       requeue-locks losses nattempts conf

-- Per call at most this many of each, so a script stays short; the caller looks again at once.
local PROMOTE_LIMIT = 1000
-- model/config.ts DEFAULT_QUEUE_CONFIG.maxDeliveries
local DEFAULT_MAX_DELIVERIES = 10

-- model/history.ts maxDeliveriesError
local function max_deliveries_error(losses)
  return 'lost its lock ' .. losses .. ' times (maxDeliveries ' .. losses ..
    '): a handler that kills or stalls its worker?'
end

-- Ends a scheduled wait now: a backoff (queued-with-backoff), or a requeue's (done-with-requeue:
-- a new run, out of done). The message goes to the front of its ready list.
local function end_wait(id, ready, w)
  if redis.call('SISMEMBER', K.done, id) == 1 then
    later(w, 'srem', K.done, id)
    later(w, 'srem', K.requeue, id)
    later(w, 'zrem', K.done_at, id)
    later(w, 'zrem', K.requeue_schedule, id)
    later(w, 'hdel', K.nattempts, id)
    later(w, 'hdel', K.losses, id)
  end
  later(w, 'hdel', K.backoffs, id)
  later(w, 'zrem', K.schedule, id)
  push_ready(ready, lane_of(id), id, true)
end

-- Returns true when more may be due than were moved. `heads` (optional): the scores of the first entries
-- of schedule and lock-expiry (`schedule`, `expiry`; nil when empty) as the caller read them: a set whose
-- first entry is not due yet is not read again.
local function promote(now, ready, w, heads)
  local due, expired = {}, {}
  if heads == nil or (heads.schedule ~= nil and heads.schedule <= now) then
    due = redis.call('ZRANGEBYSCORE', K.schedule, '-inf', now, 'LIMIT', 0, PROMOTE_LIMIT)
  end
  if heads == nil or (heads.expiry ~= nil and heads.expiry <= now) then
    expired = redis.call('ZRANGEBYSCORE', K.lock_expiry, '-inf', now, 'LIMIT', 0, PROMOTE_LIMIT)
  end
  if #due > 0 or #expired > 0 then check_rare() end
  for _, id in ipairs(due) do end_wait(id, ready, w) end
  local max_deliveries = nil
  local back = {}
  for _, id in ipairs(expired) do
    local holder, claimed = redis.call('HGET', K.holders, id), nil
    if holder then holder, claimed = holder_parts(holder) end
    append_history(id, redis.call('HGET', K.nattempts, id), nil, now, holder, 'lost', nil)
    local losses = redis.call('HINCRBY', K.losses, id, 1)
    if max_deliveries == nil then
      max_deliveries = tonumber(redis.call('HGET', K.conf, 'max_deliveries')) or DEFAULT_MAX_DELIVERIES
    end
    if max_deliveries > 0 and losses >= max_deliveries then
      local err = max_deliveries_error(losses)
      event('failed', id, redis.call('HGET', K.nattempts, id), err)
      -- Before fail: a dead-letter move forgets the message's group.
      release_groups({ id }, ready, false)
      fail(id, now, 'error\n' .. err)
    else
      back[#back + 1] = id
      -- The claim's time, which only its holder kept, stays the message's last change.
      if claimed then later(w, 'hset', K.updated_at, id, num_str(claimed)) end
      later(w, 'hdel', K.locks, id)
      later(w, 'hdel', K.holders, id)
      later(w, 'zrem', K.lock_expiry, id)
      later(w, 'zrem', K.requeue_locks, id)
      push_ready(ready, lane_of(id), id, true)
    end
  end
  -- Their groups' counts go down; those back at the front of their lanes take the room themselves (so
  -- parked ones keep their order behind them). Failed ones made room above.
  if #back > 0 then release_groups(back, ready, true) end
  return #due == PROMOTE_LIMIT or #expired == PROMOTE_LIMIT
end
