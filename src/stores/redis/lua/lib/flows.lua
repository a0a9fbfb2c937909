-- flows: a flow's parent waits (`waiting-children`, scored by when it may run) until each of its children has
-- ended. A child keeps its parent in `parent` ('<policy> <parent queue> <parent id>', the policy f, i or r for
-- onChildFailure fail, ignore or remove) and owes it one count while `owes` holds the same value. The script of
-- the child's final end (a finish's success; fail: a final failure, a dead-letter move, a cancel, an expiry,
-- too many lost locks; remove) pays it with flow_child_end, which deletes the `owes` field as it counts: a
-- child is counted once, in the write of its end. At 0 left the parent is queued (or scheduled for its runAt).
-- Parents and children may be in any queue of the store: their keys are named from the prefix, as a
-- dead-letter move names its queue's (never on a cluster, where two queues' keys may live on two slots and the
-- store has no flows). A queue whose `owes` is not empty carries the layout mark LAYOUT_FLOWS: a finish of a
-- queue without flow children looks nothing up. Scripts include common and events before it.
--
-- KEYS: (none of its own)

-- Key names made in this call, by queue then name ('' holds the queue's base): a flow names thousands.
local FLOW_KEYS = {}
local function reset_flows()
  FLOW_KEYS = {}
end

-- The key `name` of any queue of the store.
local function flow_key(queue, name)
  local keys = FLOW_KEYS[queue]
  if keys == nil then
    keys = { [''] = string.match(KEY_BASE, '^([^{]*){') .. '{' .. queue .. '}:' }
    FLOW_KEYS[queue] = keys
  end
  local key = keys[name]
  if key == nil then
    key = keys[''] .. name
    keys[name] = key
  end
  return key
end

-- The name of the queue the script was called for.
local function flow_queue()
  return string.match(KEY_BASE, '{([^}]*)}:$')
end

-- The ready list of a lane of any queue (see ready_list in common).
local function flow_ready_list(queue, lane)
  local list = flow_key(queue, 'mid-circle')
  if lane == '' then return list end
  local c = string.byte(lane, 1)
  if c == 64 or c == 35 then return list .. lane end
  return list .. ':' .. lane
end

-- Notes an event of `queue`: with the script's own when it is that queue's (events_begin ran), else appended now.
local function flow_event(queue, kind, id, attempt, err, now)
  if queue == flow_queue() and EV.on ~= nil then return event(kind, id, attempt, err) end
  local conf = redis.call('HMGET', flow_key(queue, 'conf'), 'events', 'events_max_count')
  if conf[1] ~= '1' then return end
  local line = kind .. ' ' .. attempt_text(attempt) .. ' ' .. id
  if err then line = line .. ' ' .. string.gsub(err, '[\\\n]', ESCAPES) end
  append_events(flow_key(queue, 'events'), flow_key(queue, 'events-seq'), flow_key(queue, 'events-wake'),
    tonumber(conf[2]) or DEFAULT_EVENTS_MAX_COUNT, now, { line })
end

-- A queue that now has messages owing counts: a marked one's finishes look them up from now on (an unmarked
-- one's do anyway, and enqueue marks it so when it marks it).
local function flow_mark(queue)
  local key = flow_key(queue, 'layout')
  if redis.call('GET', key) == LAYOUT_VERSION then redis.call('SET', key, LAYOUT_FLOWS) end
end

-- Its finishes stop looking once none of its messages owes a count.
local function flow_unmark(queue)
  local key = flow_key(queue, 'layout')
  if redis.call('EXISTS', flow_key(queue, 'owes')) == 0 and redis.call('GET', key) == LAYOUT_FLOWS then
    redis.call('SET', key, LAYOUT_VERSION)
  end
end

-- A parent's children as { queue, id } pairs, in the order written.
local function flow_children_of(queue, id)
  local refs = redis.call('HGET', flow_key(queue, 'children'), id)
  local children = {}
  if refs then
    for q, c in string.gmatch(refs, '(%S+) (%S+)') do children[#children + 1] = { q, c } end
  end
  return children
end

-- How a child that still owes its parent stands: 'waiting' (a parent itself), 'queued' (not handed out, or
-- handed out and given back: no lock), or nil (held by a consumer).
local function flow_not_started(queue, id)
  if redis.call('ZSCORE', flow_key(queue, 'waiting-children'), id) then return 'waiting' end
  if redis.call('HEXISTS', flow_key(queue, 'locks'), id) == 1 then return nil end
  return 'queued'
end

-- Takes a queued message out of where it waits: the schedule, else its ready list or its group's parked list
-- (blanked in place, as unready does).
local function flow_unqueue(queue, id)
  redis.call('HDEL', flow_key(queue, 'backoffs'), id)
  if redis.call('ZREM', flow_key(queue, 'schedule'), id) == 1 then return end
  local lane = lane_for(redis.call('HGET', flow_key(queue, 'filters'), id) or '',
    redis.call('HGET', flow_key(queue, 'priorities'), id))
  local lists = { flow_ready_list(queue, lane) }
  local group = redis.call('HGET', flow_key(queue, 'groups'), id)
  if group then lists[2] = flow_ready_list(queue, '#' .. group) end
  for _, list in ipairs(lists) do
    local at = redis.call('LPOS', list, id)
    if at then
      redis.call('LSET', list, at, '')
      return
    end
  end
end

local FLOW_FORGET_HASHES = { 'messages', 'metadata', 'filters', 'policies', 'history', 'losses', 'nattempts',
  'locks', 'holders', 'backoffs', 'outcomes', 'enqueued-at', 'updated-at', 'requeue-content', 'priorities',
  'groups', 'progress', 'logs', 'results', 'parent', 'owes', 'children', 'children-left' }
local FLOW_FORGET_ZSETS = { 'schedule', 'lock-expiry', 'requeue-locks', 'requeue-schedule', 'done-at', 'dedupe',
  'failed', 'expiry', 'waiting-children' }

-- Deletes a message of any queue from its keys (as forget does; a flow's messages have no debounce id).
local function flow_forget(queue, id)
  for _, name in ipairs(FLOW_FORGET_HASHES) do redis.call('HDEL', flow_key(queue, name), id) end
  for _, name in ipairs(FLOW_FORGET_ZSETS) do redis.call('ZREM', flow_key(queue, name), id) end
  redis.call('SREM', flow_key(queue, 'done'), id)
  redis.call('SREM', flow_key(queue, 'requeue'), id)
end

-- A parent whose children have all ended: queued now, or at its runAt (its time to live counts from then on).
local function flow_release(queue, id, now)
  local key = function(name) return flow_key(queue, name) end
  local due = tonumber(redis.call('ZSCORE', key('waiting-children'), id)) or now
  redis.call('ZREM', key('waiting-children'), id)
  redis.call('HDEL', key('children-left'), id)
  redis.call('HSET', key('updated-at'), id, now)
  local policy = redis.call('HGET', key('policies'), id)
  local expire_at = policy and string.match(policy, '"expireAt":(%d+)')
  if expire_at then redis.call('ZADD', key('expiry'), expire_at, id) end
  if due > now then
    redis.call('HSET', key('backoffs'), id, due)
    redis.call('ZADD', key('schedule'), due, id)
  else
    local class = redis.call('HGET', key('filters'), id) or ''
    local priority = redis.call('HGET', key('priorities'), id)
    local lane = lane_for(class, priority)
    redis.call('LPUSH', flow_ready_list(queue, lane), id)
    redis.call('HINCRBY', key('pushes'), lane, 1)
    if lane ~= class then redis.call('ZADD', key('lanes'), tonumber(priority), lane) end
  end
  redis.call('PUBLISH', key('wake'), 'flow')
end

-- A message that never ran fails in place with `err` (no dead-letter move): a waiting parent, or a queued
-- child canceled with its parent.
local function flow_fail_in_place(queue, id, err, now)
  local key = function(name) return flow_key(queue, name) end
  redis.call('ZREM', key('waiting-children'), id)
  redis.call('HDEL', key('children-left'), id)
  redis.call('HSET', key('outcomes'), id, 'error\n' .. err)
  redis.call('HSET', key('updated-at'), id, now)
  redis.call('ZADD', key('failed'), now, id)
  flow_event(queue, 'failed', id, redis.call('HGET', key('nattempts'), id) or 0, err, now)
end

local flow_child_end

-- Removes a parent's children that have not started, and theirs (onChildFailure 'remove').
local function flow_remove_children(queue, id, now)
  for _, ref in ipairs(flow_children_of(queue, id)) do
    local cq, cid = ref[1], ref[2]
    local how = redis.call('HEXISTS', flow_key(cq, 'owes'), cid) == 1 and flow_not_started(cq, cid)
    if how then
      if how == 'waiting' then flow_remove_children(cq, cid, now) else flow_unqueue(cq, cid) end
      flow_event(cq, 'removed', cid, redis.call('HGET', flow_key(cq, 'nattempts'), cid) or 0, nil, now)
      flow_forget(cq, cid)
      flow_unmark(cq)
    end
  end
end

-- The message `id` of `queue` ended (`failed`: for good, with `err`); when it owed its parent a count, the
-- parent counts it now. Call it in the script of the end, before the message moves or goes.
flow_child_end = function(queue, id, failed, err, now)
  local owes = flow_key(queue, 'owes')
  local owed = redis.call('HGET', owes, id)
  if not owed then return end
  redis.call('HDEL', owes, id)
  flow_unmark(queue)
  local policy, pq, pid = string.match(owed, '^(%a) (%S+) (%S+)$')
  if not redis.call('ZSCORE', flow_key(pq, 'waiting-children'), pid) then return end
  if not failed or policy == 'i' then
    if redis.call('HINCRBY', flow_key(pq, 'children-left'), pid, -1) <= 0 then flow_release(pq, pid, now) end
    return
  end
  if policy == 'r' then flow_remove_children(pq, pid, now) end
  local why = 'child ' .. queue .. '/' .. id .. ' failed'
  if err then why = why .. ': ' .. err end
  flow_fail_in_place(pq, pid, why, now)
  flow_child_end(pq, pid, true, why, now)
end

-- Cancels a waiting parent: it fails with `err`, and so does each of its children that has not started.
local function flow_cancel_parent(queue, id, err, now)
  flow_fail_in_place(queue, id, err, now)
  flow_child_end(queue, id, true, err, now)
  for _, ref in ipairs(flow_children_of(queue, id)) do
    local cq, cid = ref[1], ref[2]
    local how = redis.call('HEXISTS', flow_key(cq, 'owes'), cid) == 1 and flow_not_started(cq, cid)
    if how == 'waiting' then
      flow_cancel_parent(cq, cid, err, now)
    elseif how then
      flow_unqueue(cq, cid)
      flow_fail_in_place(cq, cid, err, now)
      flow_child_end(cq, cid, true, err, now)
    end
  end
end

-- A child moved to another queue (a dead-letter move, after its end was counted) stays its parent's child:
-- its link goes with it, and its parent's list of children names its new queue.
local function flow_child_moved(queue, id, to)
  local link = redis.call('HGET', flow_key(queue, 'parent'), id)
  if not link then return end
  redis.call('HSET', flow_key(to, 'parent'), id, link)
  local _, pq, pid = string.match(link, '^(%a) (%S+) (%S+)$')
  local key = flow_key(pq, 'children')
  local refs = redis.call('HGET', key, pid)
  if not refs then return end
  local lines = {}
  for q, c in string.gmatch(refs, '(%S+) (%S+)') do
    if q == queue and c == id then q = to end
    lines[#lines + 1] = q .. ' ' .. c
  end
  redis.call('HSET', key, pid, table.concat(lines, '\n'))
end

-- A failed child retried while its parent still waits owes it a count again (it will end anew).
local function flow_child_retried(queue, id)
  local link = redis.call('HGET', flow_key(queue, 'parent'), id)
  if not link or redis.call('HEXISTS', flow_key(queue, 'owes'), id) == 1 then return end
  local _, pq, pid = string.match(link, '^(%a) (%S+) (%S+)$')
  if not redis.call('ZSCORE', flow_key(pq, 'waiting-children'), pid) then return end
  redis.call('HSET', flow_key(queue, 'owes'), id, link)
  redis.call('HINCRBY', flow_key(pq, 'children-left'), pid, 1)
  flow_mark(queue)
end
