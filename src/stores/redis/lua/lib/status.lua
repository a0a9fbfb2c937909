-- status: what status() reports of one message.
--
-- KEYS: messages nattempts holders outcomes enqueued-at updated-at done-at

-- nil when the message is gone, else { state, attempt, outcome (with a newline and the last error
-- if any) or false, enqueued at, updated at, holder (while locked) or false, the end of the lock or
-- backoff or -1 }
-- When the message last changed, the latest of: its updated-at stamp, the finish that left it done (done-at:
-- such a finish writes no stamp) and the claim that holds it (in its holder: a claim writes no stamp).
local function updated_at(id, enqueued, claimed)
  local stamp = tonumber(redis.call('HGET', K.updated_at, id)) or enqueued
  local done_at = tonumber(redis.call('ZSCORE', K.done_at, id))
  if done_at ~= nil and done_at > stamp then stamp = done_at end
  if claimed ~= nil and claimed > stamp then stamp = claimed end
  return stamp
end

local function status_of(id, now)
  if redis.call('HEXISTS', K.messages, id) == 0 then return nil end
  local state, ends = state_of(id, now)
  local enqueued = tonumber(redis.call('HGET', K.enqueued_at, id)) or 0
  local holder, claimed = false, nil
  if state == 'locked' or state == 'locked-with-requeue' then
    local value = redis.call('HGET', K.holders, id)
    if value then holder, claimed = holder_parts(value) end
  end
  local outcome = redis.call('HGET', K.outcomes, id)
  -- Only a success leaves a message done; finish writes no outcome for it.
  if not outcome and (state == 'done-awaiting-gc' or state == 'done-with-backoff' or state == 'done-with-requeue') then
    outcome = 'success'
  end
  return {
    state,
    tonumber(redis.call('HGET', K.nattempts, id)) or 0,
    outcome,
    enqueued,
    updated_at(id, enqueued, claimed),
    holder,
    ends or -1,
  }
end
