#!lua flags=allow-oom
-- gc-sweep: removes finished messages older than the GC lifetime whose backoff
-- has ended, looking at one page of the oldest; or, for failed messages, those
-- failed longer ago than the lifetime. A finished message still refusing
-- duplicates, or waiting to be requeued, stays.
-- Runs when Redis is out of memory (allow-oom): GC frees memory.
--
-- KEYS: done-at failed
-- With a count to keep (keepDone, keepFailed), those finished before the newest `keep` go too, however young:
-- both are a prefix of the index in finish order, so the longer one is looked at.
-- ARGV: 'done' or 'failed', lifetime ms, offset (the entries kept by earlier pages), page size, keep ('' for
--       none)
-- Reply: { removed, looked at }
-- Include: common forget

check_layout()
local which, lifetime, offset, page = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local index = K.done_at
if which == 'failed' then index = K.failed end
local old
if ARGV[5] == '' then
  old = redis.call('ZRANGEBYSCORE', index, '-inf', now - lifetime, 'LIMIT', offset, page)
else
  local beyond = redis.call('ZCARD', index) - tonumber(ARGV[5])
  local n = math.max(beyond, redis.call('ZCOUNT', index, '-inf', now - lifetime))
  old = {}
  if offset < n then old = redis.call('ZRANGE', index, offset, math.min(offset + page, n) - 1) end
end
local w = pending_writes()
local removed = 0
for _, id in ipairs(old) do
  local backoff = tonumber(redis.call('HGET', K.backoffs, id)) or 0
  if which == 'failed' or (backoff <= now and redis.call('SISMEMBER', K.requeue, id) == 0) then
    removed = removed + 1
    forget(id, w)
  end
end
flush_writes(w)
return { removed, #old }
