#!lua
-- enqueue: adds a batch of messages (lib/enqueue.lua), or answers for ids that exist.
--
-- KEYS: conf
-- ARGV: eight per message: id, content (encoding tag + payload), metadata JSON ('' for none),
--       filter class ('' for none), initial backoff ms, flags (1: allowRequeue, 2: replacePayload),
--       policy JSON ('' for none), scheduling ('' for none, else priority, group and debounce id,
--       each '' for none, joined by newlines)
-- Reply: one string per message: 'added', 'revived', 'requeued' or 'debounced', else the state that refused it
-- Include: common events state lanes enqueue

enqueue_check(1)
local replies, changed = enqueue(1)
if changed then redis.call('PUBLISH', K.wake, 'enqueue') end
return replies
