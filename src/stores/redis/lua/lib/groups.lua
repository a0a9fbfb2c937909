-- groups: at most the queue's group_concurrency messages of one group held (locked) at once. group-held
-- counts each group's held messages (claim adds, every way out of a lock subtracts). A claim that pops a
-- message whose group is full parks it in the group's list (`mid-circle#<group>`, a lane of its own,
-- see common) instead of handing it out; when a held message of that group lets go, as many parked
-- messages as the group has room for go back to the front of their lanes, and the caller publishes a
-- wake-up. So a full group's messages are read once per release, not by every claim. A group whose parked
-- messages wait for its rate (`group-waits`, lib/group-rates.lua) is left to the claims that take them when
-- its time comes. Scripts include common and lanes before it.
--
-- KEYS: groups group-held parked conf messages pushes group-waits

-- The queue's limit, or nil for none.
local function group_limit()
  return tonumber(redis.call('HGET', K.conf, 'group_concurrency'))
end

-- The group's parked list is empty: nothing of it stays behind (groups come and go: tenants).
local function forget_parked(group)
  redis.call('SREM', K.parked, group)
  redis.call('HDEL', K.pushes, '#' .. group)
  redis.call('ZREM', K.group_waits, group)
end

-- Moves up to `free` (nil: all) of the group's parked messages back to the front of their lanes.
-- Returns how many it moved.
local function unpark(group, free, ready)
  local list = ready_list('#' .. group)
  local moved = 0
  while free == nil or moved < free do
    local ids = redis.call('RPOP', list, free and (free - moved) or 100)
    if not ids then break end
    for _, id in ipairs(ids) do
      -- Blank entries (removed or debounced messages) and messages gone meanwhile are dropped.
      if id ~= '' and redis.call('HGET', K.groups, id) == group then
        push_ready(ready, lane_of(id), id, true)
        moved = moved + 1
      end
    end
  end
  if redis.call('EXISTS', list) == 0 then forget_parked(group) end
  return moved
end

-- Parks a message popped while its group was full, at the back of the group's line.
local function park(group, id)
  local lane = '#' .. group
  redis.call('LPUSH', ready_list(lane), id)
  redis.call('HINCRBY', K.pushes, lane, 1)
  redis.call('SADD', K.parked, group)
end

-- The held messages `ids` let go of their locks (finished, lock expired): their groups' counts go down,
-- and parked messages of those groups get the room, unless `keep` (the messages go back to the front
-- of their lanes and take the room themselves: an expired lock). Returns how many went back to their lanes.
local function release_groups(ids, ready, keep)
  if redis.call('EXISTS', K.group_held) == 0 then return 0 end
  check_rare()
  local groups = hmget(K.groups, ids)
  local limit, moved = false, 0
  for i = 1, #ids do
    local group = groups[i]
    if group then
      local held = redis.call('HINCRBY', K.group_held, group, -1)
      if held <= 0 then
        redis.call('HDEL', K.group_held, group)
        held = 0
      end
      if
        not keep
        and redis.call('SISMEMBER', K.parked, group) == 1
        and not redis.call('ZSCORE', K.group_waits, group)
      then
        if limit == false then limit = group_limit() end
        if limit == nil then
          moved = moved + unpark(group, nil, ready)
        elseif held < limit then
          moved = moved + unpark(group, limit - held, ready)
        end
      end
    end
  end
  return moved
end

-- After the limit changed: every parked group gets the room the new limit gives it (but those waiting for
-- their rate).
local function unpark_all(ready)
  local limit = group_limit()
  local moved = 0
  for _, group in ipairs(redis.call('SMEMBERS', K.parked)) do
    local held = tonumber(redis.call('HGET', K.group_held, group)) or 0
    local waiting = redis.call('ZSCORE', K.group_waits, group)
    if not waiting and limit == nil then
      moved = moved + unpark(group, nil, ready)
    elseif not waiting and held < limit then
      moved = moved + unpark(group, limit - held, ready)
    end
  end
  return moved
end
