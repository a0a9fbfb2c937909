#!lua flags=allow-oom
-- events-trim: GC's exact trim of the queue's events: the newest `max count` events stay, and none
-- written longer ago than `max age` ms. Entries go whole: an entry holding both an event within the
-- count and older ones stays. Event numbers grow with time, so the first entry young enough is
-- found by a binary search over numbers (XRANGE from a number: the first entry at or after it).
-- Runs when Redis is out of memory (allow-oom): it frees memory.
--
-- KEYS: events events-seq
-- ARGV: max count, max age ms
-- Reply: the entries removed
-- Include: common

check_layout()
if redis.call('EXISTS', K.events) == 0 then return 0 end
local max, age = tonumber(ARGV[1]), tonumber(ARGV[2])
local cutoff = now_ms() - age
local head = tonumber(redis.call('GET', K.events_seq)) or 0

-- The first entry whose id is at least x: its number and when it was written, or nil.
local function entry_from(x)
  local found = redis.call('XRANGE', K.events, string.format('%d', x), '+', 'COUNT', 1)
  if #found == 0 then return nil end
  return tonumber(string.match(found[1][1], '^(%d+)')), tonumber(found[1][2][2])
end

-- The smallest number from which everything is within both bounds.
local lo, hi = math.max(1, head - max + 1), head + 1
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local number, at = entry_from(mid)
  if number == nil or at >= cutoff then hi = mid else lo = number + 1 end
end
return redis.call('XTRIM', K.events, 'MINID', string.format('%d', lo))
