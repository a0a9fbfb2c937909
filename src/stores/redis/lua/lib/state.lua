-- state: a message's state, derived from Carmine's keys as Carmine derives it,
-- plus kvmq's done-with-requeue, failed and waiting-children. Expired locks and backoffs count as over.
--
-- KEYS: done requeue backoffs locks failed waiting-children

-- The state of a message known to exist, at `now`.
local function state_of(id, now)
  if redis.call('ZSCORE', K.failed, id) then return 'failed', nil end
  local backoff = tonumber(redis.call('HGET', K.backoffs, id)) or 0
  if redis.call('SISMEMBER', K.done, id) == 1 then
    local requeued = redis.call('SISMEMBER', K.requeue, id) == 1
    if backoff > now then
      if requeued then return 'done-with-requeue', backoff end
      return 'done-with-backoff', backoff
    end
    -- A requeue whose backoff ended is queued, even before a claim moves it to its ready list.
    if requeued then return 'queued', nil end
    return 'done-awaiting-gc', nil
  end
  local lock = tonumber(redis.call('HGET', K.locks, id)) or 0
  if lock > now then
    if redis.call('SISMEMBER', K.requeue, id) == 1 then return 'locked-with-requeue', lock end
    return 'locked', lock
  end
  if backoff > now then return 'queued-with-backoff', backoff end
  -- A flow's parent has no lock, backoff or ready entry until its children have ended (lib/flows.lua).
  if redis.call('ZSCORE', K.waiting_children, id) then return 'waiting-children', nil end
  return 'queued', nil
end
