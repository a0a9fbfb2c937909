#!lua flags=no-writes
-- queue-status: counts per state, dry runs, whether paused and the consumer
-- registry, in one consistent read. Counts come from the sizes of the sets and
-- the sorted sets' counts past `now`: O(log n) each, never a walk over messages
-- (the registry's holdings walk the locked messages).
--
-- KEYS: messages done failed schedule lock-expiry dedupe requeue-locks requeue-schedule ndry-runs conf
--       consumers holders locks waiting-children
-- ARGV: none
-- Reply: { now, dry runs, paused (1 or 0), queued, queued-with-backoff, locked, locked-with-requeue,
--          done-awaiting-gc, done-with-backoff, done-with-requeue, failed, waiting-children, registrations (pairs),
--          then consumer id, JSON pairs, then message id, holder pairs of live locks }
-- Include: common consumers

check_layout()
local now = now_ms()
local after = '(' .. now
local total = redis.call('HLEN', K.messages)
local done = redis.call('SCARD', K.done)
local failed = redis.call('ZCARD', K.failed)
local locked = redis.call('ZCOUNT', K.lock_expiry, after, '+inf')
local locked_requeue = redis.call('ZCOUNT', K.requeue_locks, after, '+inf')
local waiting = redis.call('ZCOUNT', K.schedule, after, '+inf')
local done_requeue = redis.call('ZCOUNT', K.requeue_schedule, after, '+inf')
local due_requeue = redis.call('ZCARD', K.requeue_schedule) - done_requeue
local done_backoff = redis.call('ZCOUNT', K.dedupe, after, '+inf')
local counts = {
  0,
  waiting - done_requeue,
  locked - locked_requeue,
  locked_requeue,
  done - done_backoff - done_requeue - due_requeue,
  done_backoff,
  done_requeue,
  failed,
  redis.call('ZCARD', K.waiting_children),
}
local others = 0
for i = 2, #counts do others = others + counts[i] end
counts[1] = total - others

local entries, registrations = consumer_entries(now)
local paused = 0
if redis.call('HGET', K.conf, 'paused') == '1' then paused = 1 end
local reply = { now, tonumber(redis.call('GET', K.ndry_runs)) or 0, paused }
for _, n in ipairs(counts) do reply[#reply + 1] = n end
reply[#reply + 1] = registrations
for _, v in ipairs(entries) do reply[#reply + 1] = v end
return reply
