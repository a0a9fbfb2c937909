#!lua flags=no-writes
-- status: one message's state and what else status() reports.
--
-- KEYS: messages nattempts holders outcomes enqueued-at updated-at
-- ARGV: id
-- Reply: nil when the message is gone, else { state, attempt, outcome (with a newline and the
--        last error if any) or nil, enqueued at, updated at, holder (while locked) or nil,
--        the end of the lock or backoff or -1 }
-- Include: common state

check_layout()
local id = ARGV[1]
if redis.call('HEXISTS', K.messages, id) == 0 then return nil end
local state, ends = state_of(id, now_ms())
local enqueued = tonumber(redis.call('HGET', K.enqueued_at, id)) or 0
local holder = false
if state == 'locked' or state == 'locked-with-requeue' then holder = redis.call('HGET', K.holders, id) end
return {
  state,
  tonumber(redis.call('HGET', K.nattempts, id)) or 0,
  redis.call('HGET', K.outcomes, id),
  enqueued,
  tonumber(redis.call('HGET', K.updated_at, id)) or enqueued,
  holder,
  ends or -1,
}
