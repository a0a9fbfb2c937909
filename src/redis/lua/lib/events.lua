-- events: queue events, written by the very script whose transition they describe, while the queue's
-- configuration has events on (`events` '1' in conf, read by that script). A script gathers its events
-- and appends them at its end to the `events` stream, up to ENTRY_EVENTS per entry. `events-seq` counts
-- every event ever written, so events have dense numbers; an entry's id is `<n>-0`, n the number of its
-- last event, and its fields are `at` (the server's ms) then one pair per event: the type and
-- '<attempt> <id>', then ' ' and the error for failed and retrying ones that have one.
-- Dense numbers let a reader see trimmed events as a gap, and make trimming by count a MINID.
--
-- KEYS: conf events events-seq events-wake

-- Events per stream entry: an entry stays within one listpack node (4 KB), so reads and GC stay cheap.
local ENTRY_EVENTS = 100
-- model/events.ts EVENTS_MAX_COUNT
local DEFAULT_EVENTS_MAX_COUNT = 10000

-- events_begin checks these when events are on; a script with events off pays nothing for them.
RARE.events = true
RARE.events_seq = true

-- on: nil until events_begin, then whether this queue writes events.
local EV = { on = nil, max = DEFAULT_EVENTS_MAX_COUNT, pairs = {} }

-- Reads the queue's events flag and bound. Call it before the script writes anything.
local function events_begin()
  -- A conf of another type fails here, before any write (scripts on a hot path leave it out of check_layout).
  local conf = redis.pcall('HMGET', K.conf, 'events', 'events_max_count')
  if conf.err then layout_error(K.conf, redis.call('TYPE', K.conf).ok, 'hash') end
  EV.on = conf[1] == '1'
  if EV.on then
    EV.max = tonumber(conf[2]) or DEFAULT_EVENTS_MAX_COUNT
    check_type(K.events, 'stream')
    check_type(K.events_seq, 'string')
  end
end

-- Notes an event of this script's transition; written by events_flush.
local function event(kind, id, attempt, err)
  if EV.on == nil then error('kvmq: event() before events_begin()') end
  if not EV.on then return end
  local value = (tonumber(attempt) or 0) .. ' ' .. id
  if err then value = value .. ' ' .. err end
  EV.pairs[#EV.pairs + 1] = kind
  EV.pairs[#EV.pairs + 1] = value
end

-- Appends events (type, value pairs) to a queue's stream, numbering them from its `seq` key, and trims
-- inline to about `max` events: MINID ~ drops whole stream nodes only, never an event within the bound.
local function append_events(stream, seq, wake, max, now, list)
  local count = #list / 2
  if count == 0 then return end
  local last = redis.call('INCRBY', seq, count)
  local first = last - count + 1
  local keep = string.format('%d', math.max(1, last - max + 1))
  for i = 1, #list, ENTRY_EVENTS * 2 do
    local j = math.min(i + ENTRY_EVENTS * 2 - 1, #list)
    local id = string.format('%d-0', first + j / 2 - 1)
    redis.call('XADD', stream, 'MINID', '~', keep, id, 'at', now, unpack(list, i, j))
  end
  redis.call('PUBLISH', wake, '')
end

-- Writes the events noted by this script.
local function events_flush(now)
  if EV.on and #EV.pairs > 0 then append_events(K.events, K.events_seq, K.events_wake, EV.max, now, EV.pairs) end
  EV.pairs = {}
end
