#!lua
-- fire-schedule: a schedule's compare-and-set and the enqueue of its due slots, in one step. When the
-- stored schedule still holds exactly what the caller read (next slot and body), its next slot becomes
-- the new one and the messages are enqueued as the enqueue script does (lib/enqueue.lua: events,
-- debounce, priority, group...); otherwise nothing is written. This is what enqueues every slot once,
-- however many processes fire the schedule.
--
-- KEYS: schedules
-- ARGV: name, the stored value read ('<next slot ms> <body>'), the new next slot (ms), then the messages as
--       the enqueue script takes them (their shapes, then their arguments)
-- Reply: nil when the schedule changed, was removed or was fired by another; else one string per
--        message as the enqueue script replies
-- Include: common events state lanes hold handoff enqueue

enqueue_check(4)
local current = redis.call('HGET', K.schedules, ARGV[1])
if current ~= ARGV[2] then return false end
local space = string.find(current, ' ', 1, true)
redis.call('HSET', K.schedules, ARGV[1], ARGV[3] .. string.sub(current, space))
local replies, changed = enqueue()
if changed then redis.call('PUBLISH', K.wake, 'schedule') end
return replies
