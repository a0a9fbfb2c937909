#!lua
-- update: a waiting message (queued or queued-with-backoff; not held, even with its lock ended, and not a
-- requeue's new run, which stays its done run's) takes the caller's changes, in this one script, so a claim
-- runs before it (the message is held: refused) or after it (the claim takes the new content). Content is
-- replaced in place; a new priority or filter class moves a ready message to the back of its new lane (a
-- delayed one finds its lane when its wait ends); a new ready time takes it out of its lane or schedule and
-- puts it back: at the back of its lane when 0, in the schedule otherwise. Its id, attempt, history and
-- enqueue time stay; its debounce id stays (lib/enqueue.lua finds it still waiting). An `updated` event.
--
-- KEYS: messages nattempts locks backoffs done requeue failed schedule filters classes priorities lanes
--       groups mid-circle pushes updated-at wake conf events events-seq events-wake
-- ARGV: id, which changes (letters: c content, p priority, f filter class, d delay), content (encoding tag +
--       payload), priority, filter class ('' for none), delay ms; those not named are ignored
-- Reply: 'ok' and the state after; else its state ('' when unknown)
-- Include: common events state lanes

local id, which = ARGV[1], ARGV[2]
local function has(letter) return string.find(which, letter, 1, true) ~= nil end
if redis.call('HEXISTS', K.messages, id) == 0 then return { '' } end
local now = now_ms()
local state = state_of(id, now)
-- A requeue whose backoff ended reads as queued, but its run is the done one's until a claim starts it.
if redis.call('SISMEMBER', K.done, id) == 1 then return { state == 'queued' and 'done-with-requeue' or state } end
-- A holder whose lock ended may still finish its message.
if redis.call('HEXISTS', K.locks, id) == 1 then return { state == 'queued' and 'locked' or state } end
if state ~= 'queued' and state ~= 'queued-with-backoff' then return { state } end

local class = has('f') and ARGV[5] or class_of(id)
local priority = has('p') and ARGV[4] or redis.call('HGET', K.priorities, id)
local lane, old_lane = lane_for(class, priority), lane_of(id)
check_layout({ lane })
local scheduled = redis.call('ZSCORE', K.schedule, id)
local delay = has('d') and tonumber(ARGV[6]) or nil
-- A ready message leaves its list when it waits again or changes lane; a scheduled one only for a new time.
local moves = delay ~= nil or (not scheduled and lane ~= old_lane)
if moves and not scheduled and not unready(id) then return { state } end
events_begin()

if has('c') then redis.call('HSET', K.messages, id, ARGV[3]) end
if has('p') then
  if (tonumber(priority) or 0) == 0 then
    redis.call('HDEL', K.priorities, id)
  else
    redis.call('HSET', K.priorities, id, priority)
  end
end
if has('f') then
  if class == '' then
    redis.call('HDEL', K.filters, id)
  else
    redis.call('HSET', K.filters, id, class)
    redis.call('SADD', K.classes, class)
  end
end
redis.call('HSET', K.updated_at, id, now)
local ready = pending_ready()
local after = state
if moves then
  if scheduled then
    redis.call('ZREM', K.schedule, id)
    redis.call('HDEL', K.backoffs, id)
  end
  if delay ~= nil and delay > 0 then
    redis.call('HSET', K.backoffs, id, now + delay)
    redis.call('ZADD', K.schedule, now + delay, id)
    after = 'queued-with-backoff'
  else
    push_ready(ready, lane, id)
    after = 'queued'
  end
end
flush_ready(ready)
if EV.on then event('updated', id, redis.call('HGET', K.nattempts, id) or 0) end
events_flush(now)
-- Ready now, or at another time than the one a sleeping worker waits for.
redis.call('PUBLISH', K.wake, 'update')
return { 'ok', after }
