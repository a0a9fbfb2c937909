-- enqueue: adds messages, or answers for ids that exist. An existing id is
-- refused with its state, except: done-awaiting-gc is revived with the new
-- content; with allowRequeue, locked is marked to run again after it finishes,
-- and done-with-backoff to run again when its backoff ends. A failed id is refused
-- (retry or remove frees it). Each enqueue that is not refused writes an `enqueued` event (events on).
-- Shared by the enqueue script and fire-schedule, so a schedule's messages are enqueued exactly alike.
-- Ready messages go at once to parked idle workers where there are any (lib/handoff.lua).
-- Scripts include common, events, state, lanes, hold and handoff before it.
--
-- KEYS: messages metadata filters classes nattempts locks holders backoffs done requeue outcomes
--       enqueued-at updated-at requeue-content schedule done-at dedupe mid-circle wake policies losses
--       requeue-locks requeue-schedule pushes priorities lanes groups debounce debounce-of layout results
--       expiry owes

-- ARGV from `first`: the messages' shapes, one letter each ('p' or 'f'), then each message's arguments in
-- that order. A plain message ('p': no metadata, filters, backoff, flags, policy or scheduling, most are)
-- has two: id and content (encoding tag + payload). A full one ('f') has eight: id, content, metadata JSON
-- ('' for none), filter class ('' for none), initial backoff ms, flags (1: allowRequeue, 2: replacePayload,
-- 4: LIFO, ready at once ahead of its lane),
-- policy JSON ('' for none), scheduling: '' for none, else '<priority>\n<group>\n<debounce id>' (each ''
-- for none). Every argument costs the server a parse, an object and a Lua string: a plain message saves six.
local FULL = 102 -- 'f'

-- Where each message's arguments start in ARGV, and whether it is a full one (read_shapes).
local msg_at, msg_full = {}, {}
local function read_shapes(first)
  local shapes, at = ARGV[first], first + 1
  for k = 1, #shapes do
    local full = string.byte(shapes, k) == FULL
    msg_at[k], msg_full[k] = at, full
    at = at + (full and 8 or 2)
  end
  if at ~= #ARGV + 1 then error('enqueue: the arguments do not match the shapes ' .. shapes) end
end

-- A message's priority ('' for 0), group and debounce id ('' for none) from its scheduling argument.
local function scheduling(ext)
  if ext == '' then return '', '', '' end
  local priority, group, did = string.match(ext, '^([^\n]*)\n([^\n]*)\n(.*)$')
  return priority, group, did
end

-- Whether the queue carried the layout mark when enqueue_check ran (enqueue marks it when not).
local enqueue_marked = false
local function reset_enqueue()
  msg_at, msg_full, enqueue_marked = {}, {}, false
end

-- Checks the layout for the messages from ARGV[first] (before anything is written).
local function enqueue_check(first)
  read_shapes(first)
  enqueue_marked = layout_marked()
  -- Each lane's ready list once, however many messages of the batch go there.
  local lanes, seen = {}, {}
  local rare = false
  for k, i in ipairs(msg_at) do
    local lane = nil
    if msg_full[k] then
      local class, ext = ARGV[i + 3], ARGV[i + 7]
      if ext ~= '' then
        rare = true
        lane = lane_for(class, (scheduling(ext)))
      elseif class ~= '' then
        lane = class
      end
    end
    if lane and not seen[lane] then
      seen[lane] = true
      lanes[#lanes + 1] = lane
    end
  end
  -- Plain messages touch none of these.
  check_layout(lanes, { 'conf', 'priorities', 'lanes', 'groups', 'debounce', 'debounce_of' }, nil, enqueue_marked)
  if rare then check_rare() end
end

-- The conf fields an enqueue reads: events_begin's, then whether workers are parked, paused, rate_limit.
local ENQUEUE_CONF = { 'events', 'events_max_count', 'handoff', 'paused', 'rate_limit' }

-- Enqueues the messages (enqueue_check has read their shapes); returns one reply per message and
-- whether workers should look: a message became ready and was not handed off, or one was scheduled
-- (the caller publishes the wake-up after its events).
local function enqueue()
  local conf = read_conf(ENQUEUE_CONF)
  events_begin(conf)
  local now = now_ms()
  local now_s = num_str(now)
  local w = pending_writes()
  local ready = pending_ready()
  local replies = {}
  -- Messages made ready, the priority-0 lanes they joined (in order), and whether a backoff was set.
  -- A LIFO message goes ahead of its lane's messages, so none of them may be handed off before it (no handoff).
  local readied, lanes, timed, newest = 0, {}, false, false
  local function make_ready(lane, id, lifo)
    push_ready(ready, lane, id, lifo and 'newest')
    newest = newest or lifo
    readied = readied + 1
    if not lanes[lane] and not string.find(lane, '@', 1, true) then
      lanes[lane] = true
      lanes[#lanes + 1] = lane
    end
  end

  -- Content, metadata, filters, priority and group of a message that starts a new run, queued now or
  -- after `backoff` ms.
  local function place(id, meta, class, backoff, revived, policy, priority, group, lifo)
    if meta ~= '' then later(w, 'hset', K.metadata, id, meta) elseif revived then later(w, 'hdel', K.metadata, id) end
    if policy ~= '' then
      later(w, 'hset', K.policies, id, policy)
      -- A time to live (model/policy.ts expireAt): indexed for the GC's sweep (gc-expire.lua).
      local expire_at = string.match(policy, '"expireAt":(%d+)')
      if expire_at then later(w, 'zadd', K.expiry, expire_at, id) end
    elseif revived then
      later(w, 'hdel', K.policies, id)
    end
    if class ~= '' then
      later(w, 'hset', K.filters, id, class)
      later(w, 'sadd', K.classes, class)
    elseif revived then
      later(w, 'hdel', K.filters, id)
    end
    local lane = class
    if priority ~= '' then
      later(w, 'hset', K.priorities, id, priority)
      lane = lane_for(class, priority)
    elseif revived then
      later(w, 'hdel', K.priorities, id)
    end
    if group ~= '' then later(w, 'hset', K.groups, id, group) elseif revived then later(w, 'hdel', K.groups, id) end
    later(w, 'hset', K.enqueued_at, id, now_s)
    if backoff > 0 then
      -- Written now: a duplicate later in this batch must see the backoff.
      redis.call('HSET', K.backoffs, id, now + backoff)
      later(w, 'zadd', K.schedule, now + backoff, id)
      timed = true
    else
      make_ready(lane, id, lifo)
    end
  end

  -- A debounce: the message `wid` took debounce id `did` last; when it is still waiting (queued or
  -- queued-with-backoff, not held and not a requeue's new run), it takes this content and metadata and
  -- becomes ready `backoff` ms from now, keeping its id, filters, priority, group and policy. Returns
  -- whether it did (else the new message is added as usual and takes the debounce id).
  local function debounce(wid, content, meta, backoff)
    if redis.call('HEXISTS', K.messages, wid) == 0 or redis.call('SISMEMBER', K.done, wid) == 1
      or redis.call('HEXISTS', K.locks, wid) == 1 or redis.call('ZSCORE', K.failed, wid) then
      return false
    end
    if redis.call('ZSCORE', K.schedule, wid) then
      redis.call('ZREM', K.schedule, wid)
      redis.call('HDEL', K.backoffs, wid)
    elseif not unready(wid) then
      return false
    end
    redis.call('HSET', K.messages, wid, content)
    if meta ~= '' then redis.call('HSET', K.metadata, wid, meta) else redis.call('HDEL', K.metadata, wid) end
    redis.call('HSET', K.updated_at, wid, now)
    if backoff > 0 then
      redis.call('HSET', K.backoffs, wid, now + backoff)
      redis.call('ZADD', K.schedule, now + backoff, wid)
      timed = true
    else
      make_ready(lane_of(wid), wid, false)
    end
    event('enqueued', wid, redis.call('HGET', K.nattempts, wid) or 0)
    return true
  end

  -- The debounce index: `did` → id, and back, so the entry leaves with the message.
  local function index_debounce(id, did)
    if did ~= '' then
      redis.call('HSET', K.debounce, did, id)
      redis.call('HSET', K.debounce_of, id, did)
      return
    end
    local old = redis.call('HGET', K.debounce_of, id)
    if old then
      redis.call('HDEL', K.debounce_of, id)
      if redis.call('HGET', K.debounce, old) == id then redis.call('HDEL', K.debounce, old) end
    end
  end

  -- What is left of a finished run, before its id starts a new one (its history stays).
  local function forget_run(id)
    for _, key in ipairs({ K.nattempts, K.outcomes, K.backoffs, K.locks, K.holders, K.updated_at, K.requeue_content,
      K.losses, K.results }) do
      redis.call('HDEL', key, id)
    end
    redis.call('SREM', K.done, id)
    redis.call('ZREM', K.done_at, id)
    redis.call('ZREM', K.dedupe, id)
  end

  for k, i in ipairs(msg_at) do
    local id, content, meta, class, backoff, flags, policy, ext = ARGV[i], ARGV[i + 1], '', '', 0, 0, '', ''
    if msg_full[k] then
      meta, class, backoff, flags = ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
      policy, ext = ARGV[i + 6], ARGV[i + 7]
    end
    local priority, group, did = scheduling(ext)
    local allow_requeue, replace, lifo = flags % 2 == 1, flags % 4 >= 2, flags >= 4
    local waiting = nil
    if did ~= '' then
      -- Earlier messages of the batch are written first: one of them may be the waiting one.
      flush_writes(w)
      flush_ready(ready)
      w, ready = pending_writes(), pending_ready()
      waiting = redis.call('HGET', K.debounce, did)
    end
    if waiting and debounce(waiting, content, meta, backoff) then
      replies[#replies + 1] = 'debounced ' .. waiting
    elseif redis.call('HSETNX', K.messages, id, content) == 1 then
      place(id, meta, class, backoff, false, policy, priority, group, lifo)
      if did ~= '' then index_debounce(id, did) end
      -- event('enqueued', id, 0), without the call: the hottest path there is.
      if EV.on then EV.lines[#EV.lines + 1] = 'enqueued 0 ' .. id end
      replies[#replies + 1] = 'added'
    else
      local state, ends = state_of(id, now)
      -- An enqueue that revives or marks a message records the attempt it is at.
      if EV.on and (state == 'done-awaiting-gc' or (allow_requeue and (state == 'done-with-backoff' or state == 'locked'))) then
        event('enqueued', id, redis.call('HGET', K.nattempts, id))
      end
      if state == 'done-awaiting-gc' then
        redis.call('HSET', K.messages, id, content)
        forget_run(id)
        place(id, meta, class, backoff, true, policy, priority, group, lifo)
        index_debounce(id, did)
        replies[#replies + 1] = 'revived'
      elseif allow_requeue and state == 'done-with-backoff' then
        -- done-with-requeue: queued when the backoff ends, as a new run.
        redis.call('SADD', K.requeue, id)
        redis.call('ZREM', K.dedupe, id)
        -- Its success stays its last outcome once it leaves done (finish wrote none).
        redis.call('HSETNX', K.outcomes, id, 'success')
        redis.call('ZADD', K.schedule, ends, id)
        redis.call('ZADD', K.requeue_schedule, ends, id)
        redis.call('HDEL', K.nattempts, id)
        redis.call('HDEL', K.losses, id)
        -- The new run starts without the last one's result.
        redis.call('HDEL', K.results, id)
        if replace then redis.call('HSET', K.messages, id, content) end
        later(w, 'hset', K.updated_at, id, now)
        replies[#replies + 1] = 'requeued'
        timed = true
      elseif allow_requeue and state == 'locked' then
        redis.call('SADD', K.requeue, id)
        redis.call('ZADD', K.requeue_locks, ends, id)
        if replace then redis.call('HSET', K.requeue_content, id, content) end
        later(w, 'hset', K.updated_at, id, now)
        replies[#replies + 1] = 'requeued'
      else
        replies[#replies + 1] = state
      end
    end
  end

  flush_writes(w)
  local handed = 0
  if conf[3] == '1' and #lanes > 0 and not newest then
    handed = hand_off(ready, lanes, { paused = conf[4], rate_limit = conf[5] }, now)
  end
  flush_ready(ready)
  events_flush(now)
  if not enqueue_marked then mark_layout(redis.call('EXISTS', K.owes) == 1) end
  return replies, timed or readied > handed
end
