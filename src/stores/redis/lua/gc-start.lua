#!lua flags=allow-oom
-- gc-start: takes the queue's GC lock, unless another GC holds it or (unless
-- forced) the stored interval has not passed since the last GC.
-- Runs when Redis is out of memory (allow-oom): GC frees memory.
--
-- KEYS: gc-lock gc-at
-- ARGV: force ('1' or '0'), interval ms, lock ms, lock token
-- Reply: 1 when the caller now holds the lock, else 0
-- Include: common

check_layout()
local force, interval, lock_ms, token = ARGV[1] == '1', tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
if redis.call('EXISTS', K.gc_lock) == 1 then return 0 end
if not force and (tonumber(redis.call('GET', K.gc_at)) or 0) + interval > now then return 0 end
redis.call('SET', K.gc_lock, token, 'PX', lock_ms)
redis.call('SET', K.gc_at, now)
return 1
