#!lua
-- retry: failed messages queued again now, at attempt 0 (the next delivery is
-- attempt 1), their lost locks forgotten; history, outcome and last error kept
-- until the next outcome. By ids (other states refused with theirs), or the
-- `max` oldest failures. Each writes an `enqueued` event at attempt 0 (events on).
--
-- KEYS: messages filters nattempts losses failed updated-at mid-circle wake pushes parent owes
-- ARGV: 'ids' then the ids, or 'oldest' and max
-- Reply: with ids, one string per id: 'ok', else its state ('' when unknown); with 'oldest', the count
-- Include: common events state lanes flows

check_layout()
events_begin()
local now = now_ms()
local ready = pending_ready()

local function requeue(id)
  redis.call('ZREM', K.failed, id)
  redis.call('HDEL', K.nattempts, id)
  redis.call('HDEL', K.losses, id)
  redis.call('HSET', K.updated_at, id, now)
  push_ready(ready, lane_of(id), id, false)
  -- A flow's child whose parent still waits counts for it again (lib/flows.lua).
  flow_child_retried(flow_queue(), id)
  event('enqueued', id, 0)
end

local reply
if ARGV[1] == 'oldest' then
  local ids = redis.call('ZRANGE', K.failed, 0, tonumber(ARGV[2]) - 1)
  for _, id in ipairs(ids) do requeue(id) end
  reply = #ids
else
  reply = {}
  for i = 2, #ARGV do
    local id = ARGV[i]
    local state = ''
    if redis.call('HEXISTS', K.messages, id) == 1 then state = state_of(id, now) end
    if state == 'failed' then
      requeue(id)
      state = 'ok'
    end
    reply[i - 1] = state
  end
end
flush_ready(ready)
events_flush(now)
if ready.count > 0 then redis.call('PUBLISH', K.wake, 'retry') end
return reply
