#!lua flags=allow-oom
-- extend: renews the locks a consumer still holds, for the attempts it was handed.
-- Runs when Redis is out of memory (allow-oom): a running handler keeps its message.
--
-- KEYS: locks holders nattempts lock-expiry requeue requeue-locks
-- ARGV: consumer id, lock ms, then two per message: id, attempt
-- Reply: the ids the consumer no longer holds
-- Include: common

check_layout()
local consumer, lock_ms = ARGV[1], tonumber(ARGV[2])
local lock_until = now_ms() + lock_ms
local w = pending_writes()
local lost = {}
local marked = redis.call('SCARD', K.requeue) > 0
for i = 3, #ARGV, 2 do
  local id, attempt = ARGV[i], ARGV[i + 1]
  if holds(redis.call('HGET', K.holders, id), consumer, attempt, id) then
    later(w, 'hset', K.locks, id, lock_until)
    later(w, 'zadd', K.lock_expiry, lock_until, id)
    if marked and redis.call('SISMEMBER', K.requeue, id) == 1 then later(w, 'zadd', K.requeue_locks, lock_until, id) end
  else
    lost[#lost + 1] = id
  end
end
flush_writes(w)
return lost
