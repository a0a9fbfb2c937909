#!lua flags=allow-oom
-- remove: deletes messages in any state but locked and locked-with-requeue
-- (a running handler), from every key. A message waiting in a ready list is
-- found there (LPOS: a walk of that list) and its entry blanked in place, so
-- list cursors keep their positions; a claim drops blank entries (so does a parked list's).
-- Each removal writes a `removed` event at the message's attempt (events on).
-- Runs when Redis is out of memory (allow-oom): it frees memory.
--
-- KEYS: mid-circle
-- ARGV: ids
-- Reply: one string per id: 'ok', else its state ('' when unknown)
-- Include: common events state lanes forget flows

check_layout()
events_begin()
local now = now_ms()
local replies = {}
for i, id in ipairs(ARGV) do
  replies[i] = ''
  if redis.call('HEXISTS', K.messages, id) == 1 then
    local state = state_of(id, now)
    if state == 'locked' or state == 'locked-with-requeue' then
      replies[i] = state
    else
      if state == 'queued' and not redis.call('ZSCORE', K.schedule, id) and not redis.call('ZSCORE', K.lock_expiry, id)
        and redis.call('SISMEMBER', K.done, id) == 0 then
        unready(id)
      end
      if EV.on then event('removed', id, redis.call('HGET', K.nattempts, id)) end
      -- A flow's child ends for its parent (lib/flows.lua).
      flow_child_end(flow_queue(), id, true, 'removed', now)
      forget(id)
      replies[i] = 'ok'
    end
  end
end
events_flush(now)
return replies
