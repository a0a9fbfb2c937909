#!lua flags=no-writes
-- queue-status: counts per state, dry runs and the consumer registry, in one
-- consistent read. Counts come from the sorted sets' sizes past `now` and the
-- requeue set, so they cost O(log n + requeued), not a walk over the messages.
--
-- KEYS: messages done requeue backoffs locks schedule lock-expiry dedupe ndry-runs consumers holders
-- ARGV: none
-- Reply: { now, dry runs, queued, queued-with-backoff, locked, locked-with-requeue,
--          done-awaiting-gc, done-with-backoff, done-with-requeue, registrations (pairs),
--          then consumer id, JSON pairs, then message id, holder pairs of live locks }
-- Include: common state consumers

check_layout()
local now = now_ms()
local after = '(' .. now
local total = redis.call('HLEN', K.messages)
local done = redis.call('SCARD', K.done)
local locked = redis.call('ZCOUNT', K.lock_expiry, after, '+inf')
local waiting = redis.call('ZCOUNT', K.schedule, after, '+inf')
local done_backoff = redis.call('ZCOUNT', K.dedupe, after, '+inf')
local locked_requeue, done_requeue, due_requeue = 0, 0, 0
for _, id in ipairs(redis.call('SMEMBERS', K.requeue)) do
  local state = state_of(id, now)
  if state == 'locked-with-requeue' then
    locked_requeue = locked_requeue + 1
  elseif state == 'done-with-requeue' then
    done_requeue = done_requeue + 1
  elseif state == 'queued' and redis.call('SISMEMBER', K.done, id) == 1 then
    due_requeue = due_requeue + 1
  end
end
local counts = {
  0,
  waiting - done_requeue,
  locked - locked_requeue,
  locked_requeue,
  done - done_backoff - done_requeue - due_requeue,
  done_backoff,
  done_requeue,
}
local others = 0
for i = 2, #counts do others = others + counts[i] end
counts[1] = total - others

local entries, registrations = consumer_entries(now)
local reply = { now, tonumber(redis.call('GET', K.ndry_runs)) or 0 }
for _, n in ipairs(counts) do reply[#reply + 1] = n end
reply[#reply + 1] = registrations
for _, v in ipairs(entries) do reply[#reply + 1] = v end
return reply
