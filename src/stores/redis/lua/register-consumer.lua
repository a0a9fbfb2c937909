#!lua flags=allow-oom
-- register-consumer: adds or renews a consumer's registration, which lapses after its TTL.
-- Runs when Redis is out of memory (allow-oom): a worker must start to drain the queue.
--
-- KEYS: consumers
-- ARGV: consumer id, host, pid, TTL ms
-- Reply: 1
-- Include: common

check_layout()
local id, host, pid, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local started = now
local existing = redis.call('HGET', K.consumers, id)
if existing then
  local ok, previous = pcall(cjson.decode, existing)
  if ok and type(previous) == 'table' and tonumber(previous.startedAt) then started = previous.startedAt end
end
local registration = { host = host, pid = pid, startedAt = started, lastSeenAt = now, expiresAt = now + ttl }
redis.call('HSET', K.consumers, id, cjson.encode(registration))
return 1
