#!lua flags=no-writes
-- read-events: a page of the queue's events (see lib/events.lua) after an event number, oldest first.
-- XRANGE from that number finds the entry holding the next event at once, so a page costs O(page).
-- The numbers are dense: a page that starts past the next number, or no events when the newest
-- number is past it, means events after it were trimmed unread (missed).
--
-- KEYS: events events-seq
-- ARGV: after (an event number; '' for from the oldest kept), limit
-- Reply: { missed (1 or 0), head (the newest event's number, 0 for none), then three per event: number,
--        at, its line ('<type> <attempt> <id>', then ' ' and the escaped error) }
-- Include: common

check_layout()
local after, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local head = tonumber(redis.call('GET', K.events_seq)) or 0
local reply = { 0, head }
local start = '-'
if after ~= nil then start = string.format('%d', after + 1) end
local n = 0
local first = true
while n < limit do
  -- Every entry holds at least one event: never more entries than events still wanted.
  local asked = math.min(100, limit - n)
  local entries = redis.call('XRANGE', K.events, start, '+', 'COUNT', asked)
  for _, entry in ipairs(entries) do
    -- Fields: at, n, events (one line per event).
    local fields = entry[2]
    local number = tonumber(string.match(entry[1], '^(%d+)')) - tonumber(fields[4])
    if first and after ~= nil and number + 1 > after + 1 then reply[1] = 1 end
    first = false
    for line in string.gmatch(fields[6], '[^\n]+') do
      number = number + 1
      if (after == nil or number > after) and n < limit then
        n = n + 1
        reply[#reply + 1] = number
        reply[#reply + 1] = fields[2]
        reply[#reply + 1] = line
      end
    end
  end
  if #entries < asked then break end
  start = '(' .. entries[#entries][1]
end
if first and after ~= nil and head > after then reply[1] = 1 end
return reply
