#!lua
-- report: stores what handlers reported on messages the consumer holds, for the attempt it was handed: the
-- latest progress (and its event, events on), and log lines appended to the message's log, kept within its
-- bounds (the newest lines that fit; the oldest dropped and counted). A message the consumer no longer holds
-- gets nothing, so a late report never touches a finished or re-delivered message.
--
-- KEYS: holders nattempts progress logs
-- ARGV: consumer id, max lines, max bytes, then four per report: id, attempt, progress JSON ('' for none),
--       the lines to append as a JSON array ('' for none)
-- Reply: one integer per report, in the order of ARGV: 1 stored, 0 not held
-- Include: common events

check_layout()
events_begin()
local consumer, max_lines, max_bytes = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

-- The stored log (JSON {d = dropped, l = lines}) with `lines` appended, the oldest dropped past the bounds.
local function append_log(id, lines)
  local stored = redis.call('HGET', K.logs, id)
  local log = stored and cjson.decode(stored) or { d = 0, l = {} }
  local all = {}
  if type(log.l) == 'table' then
    for _, line in ipairs(log.l) do all[#all + 1] = line end
  end
  for _, line in ipairs(lines) do all[#all + 1] = line end
  local bytes, keep = 0, #all + 1
  for i = #all, 1, -1 do
    local size = #all[i]
    if #all - i + 1 > max_lines or bytes + size > max_bytes then break end
    bytes = bytes + size
    keep = i
  end
  local kept = {}
  for i = keep, #all do kept[#kept + 1] = all[i] end
  redis.call('HSET', K.logs, id, cjson.encode({ d = (tonumber(log.d) or 0) + keep - 1, l = kept }))
end

local replies = {}
for i = 4, #ARGV, 4 do
  local id, attempt, progress, lines = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if holds(redis.call('HGET', K.holders, id), consumer, attempt, id) then
    if progress ~= '' then
      redis.call('HSET', K.progress, id, progress)
      event('progress', id, attempt, progress)
    end
    if lines ~= '' then append_log(id, cjson.decode(lines)) end
    replies[#replies + 1] = 1
  else
    replies[#replies + 1] = 0
  end
end
events_flush(now_ms())
return replies
