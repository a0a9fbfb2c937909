#!lua flags=no-writes
-- inspect: everything kept about one message.
--
-- KEYS: messages metadata filters policies history priorities groups progress logs results
-- ARGV: id
-- Reply: nil when the message is gone, else the seven fields of `status`, then content, metadata JSON
--        or nil, filter class or nil, policy JSON or nil, history JSON or nil, priority or nil, group or nil,
--        progress JSON or nil, log JSON or nil, result (encoding tag + bytes) or nil
-- Include: common state status

check_layout()
local id = ARGV[1]
local reply = status_of(id, now_ms())
if reply == nil then return nil end
for _, key in ipairs({ K.messages, K.metadata, K.filters, K.policies, K.history, K.priorities, K.groups, K.progress,
  K.logs, K.results }) do
  reply[#reply + 1] = redis.call('HGET', key, id)
end
return reply
