#!lua
-- configure: writes the queue's configuration if it is still what the caller
-- read (compare and set), so two concurrent configure() calls never lose a change.
-- Unpausing wakes the queue's idle workers; a changed group_concurrency gives parked messages the
-- room the new limit makes (lib/groups.lua) and wakes the workers too. Removing group_rate_limit drops
-- its state (lib/group-rates.lua) and gives the messages parked for it their room, as a new limit does.
--
-- KEYS: conf wake messages consumers pushes mid-circle group-rates group-waits
-- ARGV: the fifteen fields as read (task_gc_lifetime, task_gc_interval, filter_enums, failed_lifetime,
--       paused, max_deliveries, dead_letter_queue, events, events_max_count, events_max_age,
--       rate_limit ('<max>/<perMs>'), group_concurrency, keep_done, keep_failed, group_rate_limit
--       ('<max>/<perMs>'); '' for absent or none), then
--       the new ones
-- Reply: 0 when the configuration changed meanwhile, else 1 when written (2: the queue did not exist:
--        no configuration, messages or consumers)
-- Include: common lanes groups

check_layout()
local fields = { 'task_gc_lifetime', 'task_gc_interval', 'filter_enums', 'failed_lifetime', 'paused', 'max_deliveries',
  'dead_letter_queue', 'events', 'events_max_count', 'events_max_age', 'rate_limit', 'group_concurrency',
  'keep_done', 'keep_failed', 'group_rate_limit' }
local n = #fields
local current = redis.call('HMGET', K.conf, unpack(fields))
for i = 1, n do
  if (current[i] or '') ~= ARGV[i] then return 0 end
end
local created = redis.call('EXISTS', K.conf, K.messages, K.consumers) == 0
local pairs_ = {}
for i = 1, n do
  pairs_[#pairs_ + 1] = fields[i]
  pairs_[#pairs_ + 1] = ARGV[n + i]
end
redis.call('HSET', K.conf, unpack(pairs_))
if ARGV[5] == '1' and ARGV[n + 5] ~= '1' then redis.call('PUBLISH', K.wake, 'resume') end
local rates_removed = ARGV[15] ~= '' and ARGV[n + 15] == ''
if rates_removed then redis.call('DEL', K.group_rates, K.group_waits) end
if ARGV[12] ~= ARGV[n + 12] or rates_removed then
  local ready = pending_ready()
  if unpark_all(ready) > 0 then
    flush_ready(ready)
    redis.call('PUBLISH', K.wake, 'group-concurrency')
  end
end
if created then return 2 end
return 1
