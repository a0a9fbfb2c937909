#!lua flags=allow-oom
-- cancel: a waiting, delayed or running message fails at once with the caller's error (its `failed`
-- event, in the failed set or moved to the dead-letter queue, as a final error is). One waiting in a
-- ready list (or its group's parked list) has its entry blanked in place, as remove does. A running
-- one (it has a holder, even with its lock ended) gets a history record naming its holder, its group's
-- room is given back, and the cancel is published on the queue's wake channel as
-- `cancel <attempt> <id>`: the holder's worker aborts that handler, and its finish is refused as a
-- stale holder's. A flow's parent waiting for its children fails with those of them not started yet. A
-- message done (even one waiting to be requeued) or failed is refused.
-- Runs when Redis is out of memory (allow-oom): it frees memory.
--
-- KEYS: messages nattempts holders wake mid-circle done
-- ARGV: id, error
-- Reply: 'ok' and 'running' or 'waiting', and whether it moved to the dead-letter queue ('1' or '0');
--        else its state ('' when unknown)
-- Include: common events state lanes groups forget flows fail

check_layout()
local id, err = ARGV[1], ARGV[2]
if redis.call('HEXISTS', K.messages, id) == 0 then return { '' } end
local now = now_ms()
local state = state_of(id, now)
if state == 'waiting-children' then
  -- A flow's parent: it fails, and so do its children that have not started (lib/flows.lua).
  events_begin()
  flow_cancel_parent(flow_queue(), id, err, now)
  events_flush(now)
  return { 'ok', 'waiting', '0' }
end
local cancelable = state == 'queued' or state == 'queued-with-backoff' or state == 'locked'
  or state == 'locked-with-requeue'
if not cancelable or redis.call('SISMEMBER', K.done, id) == 1 then return { state } end
events_begin()
local holder = redis.call('HGET', K.holders, id)
local attempt = redis.call('HGET', K.nattempts, id) or '0'
local ready = pending_ready()
if holder then
  append_history(id, attempt, nil, now, (holder_parts(holder)), 'error', err)
  release_groups({ id }, ready)
elseif state == 'queued' and not redis.call('ZSCORE', K.schedule, id) and not redis.call('ZSCORE', K.lock_expiry, id) then
  unready(id)
end
if EV.on then event('failed', id, attempt, err) end
fail(id, now, 'error\n' .. err)
local moved = redis.call('HEXISTS', K.messages, id) == 0
flush_ready(ready)
if ready.count > 0 then redis.call('PUBLISH', K.wake, 'cancel') end
if holder then redis.call('PUBLISH', K.wake, 'cancel ' .. attempt .. ' ' .. id) end
events_flush(now)
return { 'ok', holder and 'running' or 'waiting', moved and '1' or '0' }
