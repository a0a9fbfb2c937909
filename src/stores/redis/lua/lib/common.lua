-- common: helpers every script includes. K holds the queue's keys by name
-- (see src/stores/redis/keys.ts; in Lua '-' becomes '_' and '?' is dropped).
--
-- KEYS: (none of its own)

-- The types kvmq keeps in each key, to refuse foreign data before writing anything: src/stores/redis/keys.ts's
-- KEY_TYPES but its pub/sub channels (which hold no data), which src/stores/redis/script-sources.ts writes in
-- for the placeholder below. Built when a check first needs it: a script whose queue is marked (see
-- LAYOUT_FIELD) mostly makes no check at all.
local KEY_TYPES = nil
local function key_type(name)
  if KEY_TYPES == nil then KEY_TYPES = KEY_TYPES_FROM_KEYS_TS end
  return KEY_TYPES[name]
end

-- The `layout` key (a string) marks a queue whose keys a full check_layout found to be kvmq's: an enqueue
-- writes it after its check; clear deletes it with the rest. The hot paths (enqueue, claim, finish) of a
-- marked queue skip their TYPE calls (about a µs each, a dozen or more per call): a key another program
-- creates under the prefix later fails the call with Redis's WRONGTYPE, which the client reports as a
-- StoreLayoutError too, but maybe after part of the call's writes. Keys read before any write and those of
-- rare paths are still checked on every call.
local LAYOUT_VERSION = '1'
-- The mark of a queue some of whose messages owe a flow's parent a count (lib/flows.lua): its finishes look
-- them up, where a queue marked LAYOUT_VERSION pays nothing for flows.
local LAYOUT_FLOWS = '1f'

-- Whether a `layout` value marks the queue.
local function is_layout_mark(mark)
  return mark == LAYOUT_VERSION or mark == LAYOUT_FLOWS
end

-- Lua's unpack has a stack limit; variadic commands go in chunks of this many arguments.
local CHUNK = 1000

-- One clock for every decision: the Redis server's. Redis 7 replicates a
-- script's effects, not the script, so reading TIME before writing is safe.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A number as a command argument. Redis formats a Lua number with printf's %.17g, a few hundred ns a
-- call, paid per message in the hot paths: they pass whole numbers (times, attempts) as strings made here,
-- once per call (and once per attempt count) instead.
local INT_STRINGS = {}
local function num_str(x)
  if x ~= math.floor(x) or x > 9007199254740991 or x < -9007199254740991 then return string.format('%.17g', x) end
  local s = INT_STRINGS[x]
  if s == nil then
    s = string.format('%d', x)
    if x >= 0 and x < 64 then INT_STRINGS[x] = s end
  end
  return s
end

local function layout_error(key, found, expected)
  error({ err = 'KVMQ_LAYOUT key ' .. key .. ' holds a ' .. found .. ', not the ' .. expected .. ' kvmq keeps there' })
end

local function check_type(key, expected)
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= expected then layout_error(key, found, expected) end
end

-- Whether the queue carries the layout mark (the script must take the `layout` key), and whether that mark
-- says some of its messages owe a flow's parent a count.
local function layout_marked()
  local mark = redis.pcall('GET', K.layout)
  if type(mark) == 'table' and mark.err then layout_error(K.layout, redis.call('TYPE', K.layout).ok, 'string') end
  return is_layout_mark(mark), mark == LAYOUT_FLOWS
end

-- Marks the queue after a full check_layout found its keys kvmq's (`flows`: some of its messages owe counts).
local function mark_layout(flows)
  redis.call('SET', K.layout, flows and LAYOUT_FLOWS or LAYOUT_VERSION)
end

-- A lock's holder (`holders`): the consumer, the attempt it was handed and when it took the message, as
-- `<consumer> <attempt> <ms>`, one field: a claim writes one value where it wrote three keys, a finish reads one.
-- Parsed from the end (worker ids hold no spaces; the parse would not need that). A holder written before the
-- attempt was part of it is the consumer alone.
local function holder_value(consumer, attempt_s, claimed_s)
  return consumer .. ' ' .. attempt_s .. ' ' .. claimed_s
end

-- The consumer and claim time of a holder (the time nil for a consumer alone); the attempt is checked by holds.
local function holder_parts(holder)
  local consumer, claimed = string.match(holder, '^(.*) %d+ (%d+)$')
  if consumer == nil then return holder, nil end
  return consumer, tonumber(claimed)
end

-- Whether `holder` (a holders value or false) is `consumer` at `attempt` (a string) of message `id`.
local function holds(holder, consumer, attempt, id)
  if not holder then return false end
  local prefix = consumer .. ' ' .. attempt .. ' '
  if string.sub(holder, 1, #prefix) == prefix then return true end
  return holder == consumer and redis.call('HGET', K.nattempts, id) == attempt
end

-- The conf fields `fields` (HMGET), a conf of another type refused before any write.
local function read_conf(fields)
  local conf = redis.pcall('HMGET', K.conf, unpack(fields))
  if conf.err then layout_error(K.conf, redis.call('TYPE', K.conf).ok, 'hash') end
  return conf
end

-- The ready list of a lane: a filter class (`mid-circle` for messages without filters), followed by '@'
-- and a 4-digit priority when above 0 (`mid-circle:a=x@0003`, `mid-circle@0003`); '#<group>' is the list
-- of a full group's parked messages (`mid-circle#<group>`).
local function ready_list(lane)
  if lane == '' then return K.mid_circle end
  local c = string.byte(lane, 1)
  if c == 64 or c == 35 then return K.mid_circle .. lane end
  return K.mid_circle .. ':' .. lane
end

-- The lane of a class and a priority (a number, a string or nil: 0).
local function lane_for(class, priority)
  local p = tonumber(priority) or 0
  if p == 0 then return class end
  return class .. '@' .. string.format('%04d', p)
end

-- A lane's filter class and priority.
local function lane_parts(lane)
  local at = string.find(lane, '@', 1, true)
  if at == nil then return lane, 0 end
  return string.sub(lane, 1, at - 1), tonumber(string.sub(lane, at + 1))
end

-- A message's filter class ('' for none); the script must take the `filters` key.
local function class_of(id)
  return redis.call('HGET', K.filters, id) or ''
end

-- Checks every key the script was given, and the ready list of every filter
-- class known or about to be added, before the script writes anything: a
-- script that stopped half-way would leave messages half-written.
-- Keys a script touches only on its rare paths (see check_rare).
local RARE, RARE_NAMES = {}, {}
local rare_checked = false
-- Keys a helper checks itself, only when it is about to use them (lib/events.lua: with events on).
local CHECKED_BY_HELPER = {}
-- What a call starts from (only a library's functions need it: a script starts fresh each call).
local function reset_common()
  RARE, RARE_NAMES, rare_checked = {}, {}, false
end

-- `rare` (optional) names keys left to check_rare, so a hot path pays no TYPE call for them. `read_first`
-- (optional) names keys the script reads, with a command that refuses another type, before it writes
-- anything: that read is their check. Each TYPE call costs about a µs of the server's time, on every call.
-- `marked` (optional): the queue carries the layout mark; only the lists of `new_classes` are checked.
local function check_layout(new_classes, rare, read_first, marked)
  -- A marked queue's hot path only keeps the list: check_rare reads it, and a set is built only below.
  RARE_NAMES = rare or RARE_NAMES
  if marked then
    if K.mid_circle ~= nil then
      for _, class in ipairs(new_classes or {}) do check_type(ready_list(class), 'list') end
    end
    return
  end
  for _, name in ipairs(RARE_NAMES) do RARE[name] = true end
  local skip = {}
  for _, name in ipairs(read_first or {}) do skip[name] = true end
  local lists = K.classes ~= nil and K.mid_circle ~= nil
  -- SMEMBERS below checks `classes` itself.
  if lists then skip.classes = true end
  for name, key in pairs(K) do
    local expected = key_type(name)
    if expected ~= nil and not RARE[name] and not CHECKED_BY_HELPER[name] and not skip[name] then
      check_type(key, expected)
    end
  end
  if lists then
    for _, class in ipairs(redis.call('SMEMBERS', K.classes)) do check_type(ready_list(class), 'list') end
    for _, class in ipairs(new_classes or {}) do check_type(ready_list(class), 'list') end
  end
end

-- Checks the keys check_layout left out, once, when a rare path (a failure, a lost lock) starts:
-- the caller calls it before that path writes anything.
local function check_rare()
  if rare_checked then return end
  rare_checked = true
  for _, name in ipairs(RARE_NAMES) do
    if K[name] ~= nil and not CHECKED_BY_HELPER[name] then check_type(K[name], key_type(name)) end
  end
end

-- Runs `cmd key ...args` in chunks (args must come in whole pairs for HSET/ZADD: CHUNK is even).
local function call_chunked(cmd, key, args)
  for i = 1, #args, CHUNK do
    redis.call(cmd, key, unpack(args, i, math.min(i + CHUNK - 1, #args)))
  end
end

-- HMGET in chunks; the values line up with `fields`.
local function hmget(key, fields)
  if #fields <= CHUNK then return redis.call('HMGET', key, unpack(fields)) end
  local values = {}
  for i = 1, #fields, CHUNK do
    local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + CHUNK - 1, #fields)))
    for j = 1, #part do values[i + j - 1] = part[j] end
  end
  return values
end

-- As hmget, for a hash many queues never write (metadata, policies): an absent hash costs one EXISTS, not a
-- lookup per field. Its values are nil where HMGET's are false: callers that keep them write `or false`.
local function hmget_kept(key, fields)
  if redis.call('EXISTS', key) == 0 then return {} end
  return hmget(key, fields)
end

-- Writes gathered during a script and sent at its end, one command per key.
local function pending_writes()
  return { hset = {}, hdel = {}, zadd = {}, zrem = {}, sadd = {}, srem = {} }
end

-- Removals go first, so a field removed and set by one script ends up set.
local function flush_writes(w)
  for _, cmd in ipairs({ 'hdel', 'srem', 'zrem', 'hset', 'sadd', 'zadd' }) do
    for key, args in pairs(w[cmd]) do
      call_chunked(string.upper(cmd), key, args)
    end
  end
end

-- Queues `cmd key a [b]` in `w` (b for the pair commands hset and zadd).
local function later(w, cmd, key, a, b)
  local args = w[cmd][key]
  if args == nil then
    args = {}
    w[cmd][key] = args
  end
  args[#args + 1] = a
  if b ~= nil then args[#args + 1] = b end
end

-- Ready pushes of this script: `back` ones join the end of the line (LPUSH:
-- the list's next is on the right), `front` ones are next (RPUSH), `newest` (LIFO messages) ahead of those,
-- the latest first.
local function pending_ready()
  return { back = {}, front = {}, newest = {}, count = 0 }
end

-- `side`: true for front, 'newest' for newest, else back.
local function push_ready(r, class, id, side_name)
  local side = side_name == 'newest' and r.newest or side_name and r.front or r.back
  local list = side[class]
  if list == nil then
    list = {}
    side[class] = list
  end
  list[#list + 1] = id
  r.count = r.count + 1
end

-- Back pushes are counted per list (`pushes`): a listing's cursor holds an index
-- from the back, which only these pushes shift (claims pop the front; nothing is cut from the middle).
-- A lane of a priority above 0 joins `lanes`, which claims read in priority order.
local function flush_ready(r)
  for class, ids in pairs(r.back) do
    call_chunked('LPUSH', ready_list(class), ids)
    redis.call('HINCRBY', K.pushes, class, #ids)
  end
  for class, ids in pairs(r.front) do
    if string.find(class, '@', 1, true) then redis.call('ZADD', K.lanes, select(2, lane_parts(class)), class) end
  end
  for class in pairs(r.back) do
    if string.find(class, '@', 1, true) then redis.call('ZADD', K.lanes, select(2, lane_parts(class)), class) end
  end
  for class in pairs(r.newest) do
    if string.find(class, '@', 1, true) then redis.call('ZADD', K.lanes, select(2, lane_parts(class)), class) end
  end
  for class, ids in pairs(r.front) do
    -- The earliest is pushed last, so it is the next out.
    local reversed = {}
    for i = #ids, 1, -1 do reversed[#reversed + 1] = ids[i] end
    call_chunked('RPUSH', ready_list(class), reversed)
  end
  -- The latest is pushed last, so it is the next out.
  for class, ids in pairs(r.newest) do call_chunked('RPUSH', ready_list(class), ids) end
end
