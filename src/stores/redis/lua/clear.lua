#!lua flags=allow-oom
-- clear: removes every message of the queue, its ready lists (every priority's, every group's parked
-- list), its dry-run count, its layout mark, its rate limits' state, its debounce index and its events.
-- The configuration, the schedules, the consumer registry and the events' numbering (`events-seq`) stay, so
-- a reader behind is told it missed events. UNLINK frees large keys in the background, so a big queue does
-- not stall Redis. A message that owes a flow's parent a count ends for it first, as a removed one does
-- (lib/flows.lua): a parent in another queue does not wait for it forever.
-- Runs when Redis is out of memory (allow-oom): it frees memory.
--
-- KEYS: messages locks backoffs nattempts mid-circle done requeue eoq-backoff? ndry-runs metadata
--       filters classes holders outcomes enqueued-at updated-at requeue-content schedule lock-expiry
--       done-at dedupe policies history losses pushes requeue-locks requeue-schedule failed events
--       priorities lanes groups group-held parked debounce debounce-of rate-tat layout progress logs expiry
--       group-rates group-waits parent owes children children-left waiting-children
-- ARGV: none
-- Reply: 1
-- Include: common events flows

check_layout()
local owing = redis.call('HKEYS', K.owes)
if #owing > 0 then
  local now = now_ms()
  for _, id in ipairs(owing) do flow_child_end(flow_queue(), id, true, 'removed', now) end
end
local keys = {}
for _, class in ipairs(redis.call('SMEMBERS', K.classes)) do keys[#keys + 1] = ready_list(class) end
for _, lane in ipairs(redis.call('ZRANGE', K.lanes, 0, -1)) do keys[#keys + 1] = ready_list(lane) end
for _, group in ipairs(redis.call('SMEMBERS', K.parked)) do keys[#keys + 1] = ready_list('#' .. group) end
-- Kept: the configuration and the events' numbering, which the helpers it includes name too.
local kept = { conf = true, events_seq = true }
for name, key in pairs(K) do
  if not kept[name] then keys[#keys + 1] = key end
end
for i = 1, #keys, CHUNK do redis.call('UNLINK', unpack(keys, i, math.min(i + CHUNK - 1, #keys))) end
return 1
