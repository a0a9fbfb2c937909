#!lua flags=no-writes
-- status: one message's state and what else status() reports.
--
-- KEYS: messages results
-- ARGV: id
-- Reply: nil when the message is gone, else { state, attempt, outcome (with a newline and the
--        last error if any) or nil, enqueued at, updated at, holder (while locked) or nil,
--        the end of the lock or backoff or -1, the result (encoding tag + bytes) or nil }
-- Include: common state status

check_layout()
local reply = status_of(ARGV[1], now_ms())
if reply ~= nil then reply[8] = redis.call('HGET', K.results, ARGV[1]) end
return reply
