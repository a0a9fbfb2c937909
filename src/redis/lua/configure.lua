#!lua
-- configure: writes the queue's configuration if it is still what the caller
-- read (compare and set), so two concurrent configure() calls never lose a change.
--
-- KEYS: conf
-- ARGV: expected task_gc_lifetime, task_gc_interval, filter_enums ('' for absent),
--       then the new ones
-- Reply: 1 when written, 0 when the configuration changed meanwhile
-- Include: common

check_layout()
local fields = { 'task_gc_lifetime', 'task_gc_interval', 'filter_enums' }
local current = redis.call('HMGET', K.conf, unpack(fields))
for i = 1, 3 do
  if (current[i] or '') ~= ARGV[i] then return 0 end
end
redis.call('HSET', K.conf, fields[1], ARGV[4], fields[2], ARGV[5], fields[3], ARGV[6])
return 1
