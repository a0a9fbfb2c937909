-- hold: locks messages taken from ready lists for a consumer, as a claim does (the claim script, and an
-- enqueue handing messages to an idle worker: lib/handoff.lua). Scripts include common and events first.
--
-- KEYS: messages metadata nattempts locks holders lock-expiry policies requeue requeue-locks done failed
--       ndry-runs eoq-backoff?

-- Handling resets the dry runs (`dry`: their count as read) and the backoff that counts them.
local function reset_dry_runs(dry)
  if dry and dry ~= '0' then
    redis.call('SET', K.ndry_runs, '0')
    redis.call('DEL', K.eoq_backoff)
  end
end

-- Messages waiting or held: not finished, not failed (what a claim tells the worker's monitor).
local function queue_size()
  return redis.call('HLEN', K.messages) - redis.call('SCARD', K.done) - redis.call('ZCARD', K.failed)
end

-- Redis keeps a small hash or sorted set in one listpack (up to 128 entries by default), where each lookup,
-- insert and delete scans the whole list. The keys of held messages are its worst case: up to concurrency +
-- prefetch entries, each written and deleted once per message (a third of a busy worker's server time).
-- Once WIDE_AT messages are held, an entry too long for a listpack (*-max-listpack-value: 64 bytes by
-- default) is added to each and removed at once: Redis converts the key, and keeps it so until it is deleted.
local WIDE_AT = 32
local function keep_wide(key, sorted)
  -- pcall: where an ACL denies OBJECT, the keys stay as they are and the claim goes on.
  if redis.pcall('OBJECT', 'ENCODING', key) ~= 'listpack' then return end
  local too_long = string.rep('~', 256)
  if sorted then
    redis.call('ZADD', key, 0, too_long)
    redis.call('ZREM', key, too_long)
  else
    redis.call('HSET', key, too_long, '')
    redis.call('HDEL', key, too_long)
  end
end

-- Locks `ids[1..n]` (taken from the ready lists of `class_at[i]`) for `consumer` until now + lock_ms, and
-- appends six fields per message to `reply` (id, content, metadata JSON or false, filter class, attempt,
-- policy or false). A ready entry whose message is gone (cleared or blanked meanwhile) is dropped. Returns
-- how many it locked and the lock's end.
local function hold(consumer, ids, class_at, n, lock_ms, now, reply)
  local contents = hmget(K.messages, ids)
  local metas = hmget_kept(K.metadata, ids)
  local attempts = hmget(K.nattempts, ids)
  local policies = hmget_kept(K.policies, ids)
  local marked = redis.call('SCARD', K.requeue) > 0
  local lock_until = now + lock_ms
  local now_s, until_s = num_str(now), num_str(lock_until)
  local counts, locks, holders, expiry, m, r = {}, {}, {}, {}, 0, #reply
  for i = 1, n do
    if contents[i] then
      local id = ids[i]
      local attempt = (tonumber(attempts[i]) or 0) + 1
      local attempt_s = num_str(attempt)
      counts[m + 1], counts[m + 2] = id, attempt_s
      locks[m + 1], locks[m + 2] = id, until_s
      -- The claim time is in the holder: status reads it as the message's update time while it is held.
      holders[m + 1], holders[m + 2] = id, holder_value(consumer, attempt_s, now_s)
      expiry[m + 1], expiry[m + 2] = until_s, id
      m = m + 2
      reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = id, contents[i], metas[i] or false, class_at[i]
      reply[r + 5], reply[r + 6] = attempt, policies[i] or false
      r = r + 6
      if EV.on then event('started', id, attempt) end
      -- A message that lost its lock keeps its requeue mark: locked-with-requeue again.
      if marked and redis.call('SISMEMBER', K.requeue, id) == 1 then
        redis.call('ZADD', K.requeue_locks, lock_until, id)
      end
    end
  end
  if m == 0 then return 0, lock_until end
  call_chunked('HSET', K.nattempts, counts)
  call_chunked('HSET', K.locks, locks)
  call_chunked('HSET', K.holders, holders)
  call_chunked('ZADD', K.lock_expiry, expiry)
  -- The three keys hold an entry per held message each: one count for all.
  if redis.call('HLEN', K.locks) >= WIDE_AT then
    keep_wide(K.locks, false)
    keep_wide(K.holders, false)
    keep_wide(K.lock_expiry, true)
  end
  return m / 2, lock_until
end
