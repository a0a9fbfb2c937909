-- consumers: the registry as stored, for status replies.
--
-- KEYS: consumers holders locks

-- { registrations as id, JSON pairs..., then id, holder pairs of live locks } and how many pairs the first part has.
local function consumer_entries(now)
  local reply = redis.call('HGETALL', K.consumers)
  local registrations = #reply / 2
  local held = redis.call('HGETALL', K.holders)
  if #held > 0 then
    local ids = {}
    for i = 1, #held, 2 do ids[#ids + 1] = held[i] end
    local locks = redis.call('HMGET', K.locks, unpack(ids))
    for i, id in ipairs(ids) do
      if (tonumber(locks[i]) or 0) > now then
        reply[#reply + 1] = id
        reply[#reply + 1] = (holder_parts(held[i * 2]))
      end
    end
  end
  return reply, registrations
end
