#!lua flags=allow-oom
-- gc-finish: removes lapsed consumer registrations and releases the GC lock if the caller still holds it.
-- Runs when Redis is out of memory (allow-oom): GC frees memory.
--
-- KEYS: consumers gc-lock
-- ARGV: lock token
-- Reply: the number of registrations removed
-- Include: common

check_layout()
local now = now_ms()
local lapsed = {}
local entries = redis.call('HGETALL', K.consumers)
for i = 1, #entries, 2 do
  local ok, registration = pcall(cjson.decode, entries[i + 1])
  if ok and type(registration) == 'table' and (tonumber(registration.expiresAt) or 0) <= now then
    lapsed[#lapsed + 1] = entries[i]
  end
end
if #lapsed > 0 then call_chunked('HDEL', K.consumers, lapsed) end
if redis.call('GET', K.gc_lock) == ARGV[1] then redis.call('DEL', K.gc_lock) end
return #lapsed
