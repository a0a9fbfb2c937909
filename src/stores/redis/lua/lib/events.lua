-- events: queue events, written by the very script whose transition they describe, while the queue's
-- configuration has events on (`events` '1' in conf, read by that script). A script gathers its events
-- and appends them at its end to the `events` stream, up to ENTRY_EVENTS per entry. `events-seq` counts
-- every event ever written, so events have dense numbers; an entry's id is `<n>-0`, n the number of its
-- last event, and its fields are `at` (the server's ms), `n` (how many events it holds) and `events`: one
-- line per event, '<type> <attempt> <id>', then ' ' and the error (newlines and backslashes escaped) for
-- failed and retrying events that have one. One string per entry, not a field pair per event: XADD then
-- takes five arguments, whatever the batch, and an entry is a single listpack value.
-- Dense numbers let a reader see trimmed events as a gap, and make trimming by count a MINID.
--
-- KEYS: conf events events-seq events-wake

-- Events per stream entry: an entry stays within one listpack node (4 KB), so reads and GC stay cheap.
local ENTRY_EVENTS = 100
-- model/events.ts EVENTS_MAX_COUNT
local DEFAULT_EVENTS_MAX_COUNT = 10000

-- events_begin checks these when events are on; with events off a script neither pays for them nor
-- minds what they hold.
CHECKED_BY_HELPER.events = true
CHECKED_BY_HELPER.events_seq = true

-- on: nil until events_begin, then whether this queue writes events.
local EV = { on = nil, max = DEFAULT_EVENTS_MAX_COUNT, lines = {} }
local function reset_events()
  EV.on, EV.max, EV.lines = nil, DEFAULT_EVENTS_MAX_COUNT, {}
end

-- The conf fields events_begin takes, for a script that reads them with others of its own.
local EVENTS_CONF = { 'events', 'events_max_count' }

-- Reads the queue's events flag and bound (or takes them as read: `read`, the values of EVENTS_CONF).
-- Call it before the script writes anything.
local function events_begin(read)
  -- A conf of another type fails here, before any write (scripts on a hot path leave it out of check_layout).
  local conf = read or read_conf(EVENTS_CONF)
  EV.on = conf[1] == '1'
  if EV.on then
    EV.max = tonumber(conf[2]) or DEFAULT_EVENTS_MAX_COUNT
    check_type(K.events, 'stream')
    check_type(K.events_seq, 'string')
  end
end

-- An error's text on one line (src/stores/redis/events.ts unescapes it).
local ESCAPES = { ['\\'] = '\\\\', ['\n'] = '\\n' }

-- Attempts as text, made once: Lua formats a number with sprintf, which would cost more than the rest
-- of an event.
local ATTEMPT_TEXT = {}
local function attempt_text(attempt)
  if type(attempt) == 'string' then return attempt end
  local n = attempt or 0
  local text = ATTEMPT_TEXT[n]
  if text == nil then
    text = string.format('%d', n)
    ATTEMPT_TEXT[n] = text
  end
  return text
end

-- Notes an event of this script's transition (the attempt a number, or its text); written by events_flush.
-- Hot loops test EV.on first; the hottest (enqueue) appends its line to EV.lines itself.
local function event(kind, id, attempt, err)
  if EV.on == nil then error('kvmq: event() before events_begin()') end
  if not EV.on then return end
  local line = kind .. ' ' .. attempt_text(attempt) .. ' ' .. id
  if err then line = line .. ' ' .. string.gsub(err, '[\\\n]', ESCAPES) end
  EV.lines[#EV.lines + 1] = line
end

-- Appends event lines to a queue's stream, numbering them from its `seq` key, and trims inline to about
-- `max` events: MINID ~ drops whole stream nodes only, never an event within the bound.
local function append_events(stream, seq, wake, max, now, lines)
  local count = #lines
  if count == 0 then return end
  local last = redis.call('INCRBY', seq, count)
  local first = last - count + 1
  local keep = string.format('%d', math.max(1, last - max + 1))
  for i = 1, count, ENTRY_EVENTS do
    local j = math.min(i + ENTRY_EVENTS - 1, count)
    redis.call('XADD', stream, 'MINID', '~', keep, string.format('%d-0', first + j - 1), 'at', now, 'n', j - i + 1,
      'events', table.concat(lines, '\n', i, j))
  end
  redis.call('PUBLISH', wake, '')
end

-- Writes the events noted by this script.
local function events_flush(now)
  if EV.on and #EV.lines > 0 then append_events(K.events, K.events_seq, K.events_wake, EV.max, now, EV.lines) end
  EV.lines = {}
end
