#!lua flags=allow-oom
-- gc-sweep: removes finished messages older than the GC lifetime whose backoff
-- has ended, looking at one page of the oldest. A finished message still
-- refusing duplicates, or waiting to be requeued, stays.
-- Runs when Redis is out of memory (allow-oom): GC frees memory.
--
-- KEYS: messages metadata filters nattempts locks holders backoffs outcomes enqueued-at updated-at
--       requeue-content done requeue done-at dedupe
-- ARGV: lifetime ms, offset (the entries kept by earlier pages), page size
-- Reply: { removed, looked at }
-- Include: common

check_layout()
local lifetime, offset, page = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local old = redis.call('ZRANGEBYSCORE', K.done_at, '-inf', now - lifetime, 'LIMIT', offset, page)
local w = pending_writes()
local removed = 0
for _, id in ipairs(old) do
  local backoff = tonumber(redis.call('HGET', K.backoffs, id)) or 0
  if backoff <= now and redis.call('SISMEMBER', K.requeue, id) == 0 then
    removed = removed + 1
    for _, key in ipairs({ K.messages, K.metadata, K.filters, K.nattempts, K.locks, K.holders, K.backoffs,
      K.outcomes, K.enqueued_at, K.updated_at, K.requeue_content }) do
      later(w, 'hdel', key, id)
    end
    later(w, 'srem', K.done, id)
    later(w, 'zrem', K.done_at, id)
    later(w, 'zrem', K.dedupe, id)
  end
end
flush_writes(w)
return { removed, #old }
