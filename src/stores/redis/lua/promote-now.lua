#!lua
-- promote-now: ends backoffs now: queued-with-backoff → queued, done-with-requeue
-- → queued (the requeue runs now, attempt 0). Other states are refused with theirs.
--
-- KEYS: messages wake pushes mid-circle
-- ARGV: ids
-- Reply: one string per id: 'ok', else its state ('' when unknown)
-- Include: common events state lanes groups forget flows fail promote

check_layout()
local now = now_ms()
local w = pending_writes()
local ready = pending_ready()
local replies = {}
for i, id in ipairs(ARGV) do
  replies[i] = ''
  if redis.call('HEXISTS', K.messages, id) == 1 then
    local state = state_of(id, now)
    if state == 'queued-with-backoff' or state == 'done-with-requeue' then
      end_wait(id, ready, w)
      -- Written now: the same id later in the call must see it queued.
      flush_writes(w)
      w = pending_writes()
      redis.call('HSET', K.updated_at, id, now)
      replies[i] = 'ok'
    else
      replies[i] = state
    end
  end
end
flush_ready(ready)
if ready.count > 0 then redis.call('PUBLISH', K.wake, 'promote') end
return replies
