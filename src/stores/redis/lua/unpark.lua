#!lua flags=allow-oom
-- unpark: a stopping worker takes no more handoffs (lib/handoff.lua). Its parking ends, the entries of its
-- handoff list that its BLPOP has not taken come back to it (it gives their messages back as it does
-- any message no handler started), and an empty entry ends the BLPOP.
-- Runs when Redis is out of memory (allow-oom): the worker then gives the messages back.
--
-- KEYS: conf idle-workers
-- ARGV: consumer id
-- Reply: the entries not taken, oldest first
-- Include: common events hold handoff

local consumer = ARGV[1]
unpark_worker(consumer, redis.call('HGET', K.conf, 'handoff') == '1', nil, nil)
local list = handoff_list(consumer)
local entries = redis.call('LRANGE', list, 0, -1)
redis.call('DEL', list)
redis.call('RPUSH', list, '')
redis.call('PEXPIRE', list, HANDOFF_TTL_MS)
return entries
