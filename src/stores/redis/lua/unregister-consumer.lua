#!lua flags=allow-oom
-- unregister-consumer: removes a consumer's registration.
-- Runs when Redis is out of memory (allow-oom): it frees memory.
--
-- KEYS: consumers
-- ARGV: consumer id
-- Reply: 1 if it was registered, else 0
-- Include: common

check_layout()
return redis.call('HDEL', K.consumers, ARGV[1])
