#!lua flags=allow-oom
-- clear: removes every message of the queue, its ready lists (every priority's, every group's parked
-- list), its dry-run count, its layout mark, its rate limits' state, its debounce index and its events.
-- The configuration, the schedules, the consumer registry and the events' numbering (`events-seq`) stay, so
-- a reader behind is told it missed events. UNLINK frees large keys in the background, so a big queue does
-- not stall Redis.
-- Runs when Redis is out of memory (allow-oom): it frees memory.
--
-- KEYS: messages locks backoffs nattempts mid-circle done requeue eoq-backoff? ndry-runs metadata
--       filters classes holders outcomes enqueued-at updated-at requeue-content schedule lock-expiry
--       done-at dedupe policies history losses pushes requeue-locks requeue-schedule failed events
--       priorities lanes groups group-held parked debounce debounce-of rate-tat layout progress logs expiry
--       group-rates group-waits parent owes children children-left waiting-children
-- ARGV: none
-- Reply: 1
-- Include: common

check_layout()
local keys = {}
for _, class in ipairs(redis.call('SMEMBERS', K.classes)) do keys[#keys + 1] = ready_list(class) end
for _, lane in ipairs(redis.call('ZRANGE', K.lanes, 0, -1)) do keys[#keys + 1] = ready_list(lane) end
for _, group in ipairs(redis.call('SMEMBERS', K.parked)) do keys[#keys + 1] = ready_list('#' .. group) end
for _, key in pairs(K) do keys[#keys + 1] = key end
for i = 1, #keys, CHUNK do redis.call('UNLINK', unpack(keys, i, math.min(i + CHUNK - 1, #keys))) end
return 1
