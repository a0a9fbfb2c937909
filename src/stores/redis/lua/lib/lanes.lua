-- lanes: where a message waits when ready. A lane is a filter class, with its priority when above 0
-- (see ready_list in common); a grouped message claimed while its group was full waits in its group's
-- parked list instead (lib/groups.lua).
--
-- KEYS: filters priorities lanes groups

-- The lane a message joins when it becomes ready.
local function lane_of(id)
  return lane_for(class_of(id), redis.call('HGET', K.priorities, id))
end

-- Blanks a queued message's entry where it waits (its ready list, else its group's parked list), in
-- place, so list cursors keep their positions; a claim drops blank entries. False when not found.
local function unready(id)
  local list = ready_list(lane_of(id))
  local at = redis.call('LPOS', list, id)
  if not at then
    local group = redis.call('HGET', K.groups, id)
    if not group then return false end
    list = ready_list('#' .. group)
    at = redis.call('LPOS', list, id)
    if not at then return false end
  end
  redis.call('LSET', list, at, '')
  return true
end
