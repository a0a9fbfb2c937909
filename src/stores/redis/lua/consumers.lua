#!lua flags=no-writes
-- consumers: the consumer registry and what each consumer holds.
--
-- KEYS: consumers holders locks
-- ARGV: none
-- Reply: { now, registrations (pairs), then consumer id, JSON pairs, then message id, holder pairs of live locks }
-- Include: common consumers

check_layout()
local now = now_ms()
local entries, registrations = consumer_entries(now)
local reply = { now, registrations }
for _, v in ipairs(entries) do reply[#reply + 1] = v end
return reply
