#!lua
-- flow: writes a flow's messages, every one or none: parents `waiting-children` (scored by when each may run),
-- the others queued (or scheduled for their runAt) as an enqueue would, children linked to their parents
-- (lib/flows.lua). Its messages may be in any queue of the store (the call's key names the root's). Every key
-- written is type-checked, and every id looked up, before the first write: an id that exists refuses the
-- whole flow. Each message writes an `enqueued` event in its queue (events on). Messages already enqueued that
-- a node depends on (dependsOn) become its children here: linked in `parent`, and owing it a count in `owes`
-- unless they have ended (a success owes nothing; a failure neither, under 'i', and refuses the flow otherwise).
--
-- KEYS: (none of its own)
-- ARGV: how many messages; then twelve per message, parents before their children: queue, id, content
--       (encoding tag + payload), metadata JSON ('' for none), filter class ('' for none), initial backoff ms,
--       policy JSON ('' for none), priority ('' for 0), group ('' for none), its parent's place in ARGV's
--       messages (1-based; 0 for the root), how many children it has, onChildFailure ('f', 'i' or 'r'); then
--       four per dependency: its node's place in the messages (1-based), queue, id, onChildFailure
-- Reply: { 'ok' }, or { 'refused', queue, id, reason } when a message's id exists in its queue (reason 'exists')
--       or a dependency is 'missing', has a parent ('has-parent') or 'failed' (nothing written)
-- Include: common events flows

local PER = 12
local count = tonumber(ARGV[1])
local nodes = {}
for base = 2, 1 + count * PER, PER do
  nodes[#nodes + 1] = {
    queue = ARGV[base], id = ARGV[base + 1], content = ARGV[base + 2], meta = ARGV[base + 3],
    class = ARGV[base + 4], backoff = tonumber(ARGV[base + 5]), policy = ARGV[base + 6],
    priority = ARGV[base + 7], group = ARGV[base + 8], parent = tonumber(ARGV[base + 9]),
    children = tonumber(ARGV[base + 10]), on_failure = ARGV[base + 11],
  }
end
local deps = {}
for base = 2 + count * PER, #ARGV, 4 do
  deps[#deps + 1] = { node = tonumber(ARGV[base]), queue = ARGV[base + 1], id = ARGV[base + 2],
    on_failure = ARGV[base + 3] }
end

local FLOW_TYPES = {
  hash = { 'messages', 'metadata', 'filters', 'policies', 'priorities', 'groups', 'enqueued-at', 'backoffs',
    'children-left', 'children', 'parent', 'owes', 'pushes', 'conf' },
  zset = { 'waiting-children', 'schedule', 'expiry', 'lanes' },
  set = { 'classes' },
  string = { 'layout' },
}

-- Each queue once: its keys' types checked (and each ready list's, keyed by its name), its events flag read.
local queues = {}
for _, node in ipairs(nodes) do
  local q = queues[node.queue]
  if q == nil then
    for kind, names in pairs(FLOW_TYPES) do
      for _, name in ipairs(names) do check_type(flow_key(node.queue, name), kind) end
    end
    local conf = redis.call('HMGET', flow_key(node.queue, 'conf'), 'events', 'events_max_count')
    q = { events = conf[1] == '1', max = tonumber(conf[2]) or DEFAULT_EVENTS_MAX_COUNT, lines = {}, wake = false }
    if q.events then
      check_type(flow_key(node.queue, 'events'), 'stream')
      check_type(flow_key(node.queue, 'events-seq'), 'string')
    end
    queues[node.queue] = q
  end
  node.lane = lane_for(node.class, node.priority)
  if node.children == 0 and node.backoff == 0 then
    local list = flow_ready_list(node.queue, node.lane)
    if not q[list] then
      q[list] = true
      check_type(list, 'list')
    end
  end
end

for _, node in ipairs(nodes) do
  if redis.call('HEXISTS', flow_key(node.queue, 'messages'), node.id) == 1 then
    return { 'refused', node.queue, node.id, 'exists' }
  end
end

-- Each dependency checked, and whether it still owes its node a count (one done and not requeued, or failed,
-- has ended); its node then waits for it too.
local DEP_TYPES = { hash = { 'messages', 'parent', 'owes', 'children' }, zset = { 'failed' },
  set = { 'done', 'requeue' }, string = { 'layout' } }
local dep_queues = {}
for _, dep in ipairs(deps) do
  if not dep_queues[dep.queue] then
    for kind, names in pairs(DEP_TYPES) do
      for _, name in ipairs(names) do check_type(flow_key(dep.queue, name), kind) end
    end
    dep_queues[dep.queue] = true
  end
  local key = function(name) return flow_key(dep.queue, name) end
  if redis.call('HEXISTS', key('messages'), dep.id) == 0 then return { 'refused', dep.queue, dep.id, 'missing' } end
  if redis.call('HEXISTS', key('parent'), dep.id) == 1 then return { 'refused', dep.queue, dep.id, 'has-parent' } end
  local failed = redis.call('ZSCORE', key('failed'), dep.id)
  if failed and dep.on_failure ~= 'i' then return { 'refused', dep.queue, dep.id, 'failed' } end
  local done = redis.call('SISMEMBER', key('done'), dep.id) == 1 and redis.call('SISMEMBER', key('requeue'), dep.id) == 0
  dep.waits = not (failed or done)
  if dep.waits then nodes[dep.node].children = nodes[dep.node].children + 1 end
end

local now = now_ms()
local w = pending_writes()
-- Ready ids per ready list, in the order written; children per parent, as '<queue> <id>' lines.
local ready, lists, children = {}, {}, {}
-- Dependencies first: they were enqueued before the flow's new children.
for _, dep in ipairs(deps) do
  local parent = nodes[dep.node]
  local link = dep.on_failure .. ' ' .. parent.queue .. ' ' .. parent.id
  later(w, 'hset', flow_key(dep.queue, 'parent'), dep.id, link)
  if dep.waits then later(w, 'hset', flow_key(dep.queue, 'owes'), dep.id, link) end
  local refs = children[dep.node] or {}
  refs[#refs + 1] = dep.queue .. ' ' .. dep.id
  children[dep.node] = refs
end
for _, node in ipairs(nodes) do
  local key = function(name) return flow_key(node.queue, name) end
  local id = node.id
  later(w, 'hset', key('messages'), id, node.content)
  later(w, 'hset', key('enqueued-at'), id, now)
  if node.meta ~= '' then later(w, 'hset', key('metadata'), id, node.meta) end
  if node.class ~= '' then
    later(w, 'hset', key('filters'), id, node.class)
    later(w, 'sadd', key('classes'), node.class)
  end
  if node.priority ~= '' then later(w, 'hset', key('priorities'), id, node.priority) end
  if node.group ~= '' then later(w, 'hset', key('groups'), id, node.group) end
  if node.policy ~= '' then later(w, 'hset', key('policies'), id, node.policy) end
  if node.children > 0 then
    -- Its time to live counts once it is queued (flow_release indexes it then).
    later(w, 'zadd', key('waiting-children'), now + node.backoff, id)
    later(w, 'hset', key('children-left'), id, node.children)
  else
    local expire_at = node.policy ~= '' and string.match(node.policy, '"expireAt":(%d+)')
    if expire_at then later(w, 'zadd', key('expiry'), expire_at, id) end
    queues[node.queue].wake = true
    if node.backoff > 0 then
      later(w, 'hset', key('backoffs'), id, now + node.backoff)
      later(w, 'zadd', key('schedule'), now + node.backoff, id)
    else
      local list = flow_ready_list(node.queue, node.lane)
      if ready[list] == nil then
        ready[list] = {}
        lists[#lists + 1] = { list = list, queue = node.queue, lane = node.lane, class = node.class,
          priority = node.priority }
      end
      table.insert(ready[list], id)
    end
  end
  if node.parent > 0 then
    local parent = nodes[node.parent]
    local link = node.on_failure .. ' ' .. parent.queue .. ' ' .. parent.id
    later(w, 'hset', key('parent'), id, link)
    later(w, 'hset', key('owes'), id, link)
    local refs = children[node.parent] or {}
    refs[#refs + 1] = node.queue .. ' ' .. id
    children[node.parent] = refs
  end
  local q = queues[node.queue]
  if q.events then q.lines[#q.lines + 1] = 'enqueued 0 ' .. id end
end
for k, refs in pairs(children) do
  later(w, 'hset', flow_key(nodes[k].queue, 'children'), nodes[k].id, table.concat(refs, '\n'))
end
flush_writes(w)
for _, at in ipairs(lists) do
  call_chunked('LPUSH', at.list, ready[at.list])
  redis.call('HINCRBY', flow_key(at.queue, 'pushes'), at.lane, #ready[at.list])
  if at.lane ~= at.class then redis.call('ZADD', flow_key(at.queue, 'lanes'), tonumber(at.priority), at.lane) end
end
for name in pairs(dep_queues) do
  if not queues[name] and redis.call('EXISTS', flow_key(name, 'owes')) == 1 then flow_mark(name) end
end
for name, q in pairs(queues) do
  if redis.call('EXISTS', flow_key(name, 'owes')) == 1 then flow_mark(name) end
  if q.events then
    append_events(flow_key(name, 'events'), flow_key(name, 'events-seq'), flow_key(name, 'events-wake'), q.max, now,
      q.lines)
  end
  if q.wake then redis.call('PUBLISH', flow_key(name, 'wake'), 'flow') end
end
return { 'ok' }
