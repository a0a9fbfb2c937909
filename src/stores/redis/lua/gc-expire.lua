#!lua flags=allow-oom
-- gc-expire: fails waiting messages never handed out (attempt 0) whose time to live has ended (their
-- policy's expireAt), from one page of the expiry index's due entries: each becomes failed with the error
-- `expired` (or moves to the dead-letter queue), with a `failed` event. An entry whose message is gone,
-- was handed out, or no longer has that deadline (its id enqueued anew) is only dropped.
-- Runs when Redis is out of memory (allow-oom): it ends messages, which GC later frees.
--
-- KEYS: expiry nattempts policies schedule mid-circle
-- ARGV: page size
-- Reply: { failed, looked at }
-- Include: common events state lanes forget flows fail

check_layout()
events_begin()
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', K.expiry, '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local failed = 0
for _, id in ipairs(due) do
  redis.call('ZREM', K.expiry, id)
  local policy = redis.call('HGET', K.policies, id)
  local at = policy and tonumber(string.match(policy, '"expireAt":(%d+)'))
  if at and at <= now and (tonumber(redis.call('HGET', K.nattempts, id)) or 0) == 0 then
    local state = state_of(id, now)
    if state == 'queued' or state == 'queued-with-backoff' then
      -- Waiting in a ready list (not a backoff that ended before a claim moved it there): blanked in place.
      if state == 'queued' and not redis.call('ZSCORE', K.schedule, id) then unready(id) end
      if EV.on then event('failed', id, 0, 'expired') end
      fail(id, now, 'error\nexpired')
      failed = failed + 1
    end
  end
end
events_flush(now)
return { failed, #due }
