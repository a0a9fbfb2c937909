#!lua
-- enqueue: adds a batch of messages (lib/enqueue.lua), or answers for ids that exist.
--
-- KEYS: conf
-- ARGV: the messages' shapes, then two or eight per message (lib/enqueue.lua: a plain message, or one
--       with metadata, filters, a backoff, flags, a policy or scheduling)
-- Reply: one string per message: 'added', 'revived', 'requeued' or 'debounced', else the state that refused it
-- Include: common events state lanes hold handoff enqueue

enqueue_check(1)
local replies, changed = enqueue()
if changed then redis.call('PUBLISH', K.wake, 'enqueue') end
return replies
