-- group-rates: a queue's group_rate_limit ('<max>/<perMs>' in conf): a group's messages start at least
-- perMs/max apart across every worker, as model/rate-limit.ts spacedGrant says. `group-rates` scores each
-- group by the earliest time its next message may start; an entry whose time has come says no more than no
-- entry, so every claim under the limit drops those first, and a group that stopped sending leaves nothing
-- behind. A claim that pops a message of a group whose time has not come parks it in the group's parked list
-- (lib/groups.lua) and scores the group in `group-waits` by that time; claims take the next parked message
-- of each group whose time came before their ready lists. `group-waits` is an index only: its score is
-- checked against `group-rates`, and a group with no parked message left leaves it. Scripts include common,
-- lanes and groups before it.
--
-- KEYS: group-rates group-waits groups

-- Guards a comparison of times with fractions, as model/rate-limit.ts does.
local RATE_EPSILON = 1e-9

-- One claim's view of the limit (nil without one: conf's field `value` is '' or absent). Reads each group's
-- time once; `group_rates_end` writes the charged ones.
local function group_rates_begin(value, now)
  if not value or value == '' then return nil end
  local max, per_ms = string.match(value, '^(%d+)/(%d+)$')
  redis.call('ZREMRANGEBYSCORE', K.group_rates, '-inf', now)
  return { interval = tonumber(per_ms) / tonumber(max), now = now, tats = {}, charged = {} }
end

-- When the group's next message may start (0: it may now).
local function group_tat(rates, group)
  local tat = rates.tats[group]
  if tat == nil then
    tat = tonumber(redis.call('ZSCORE', K.group_rates, group)) or 0
    rates.tats[group] = tat
  end
  return tat
end

local function group_rate_due(rates, group)
  return group_tat(rates, group) <= rates.now + RATE_EPSILON
end

-- A message of the group starts now: its next may start one interval later.
local function group_rate_charge(rates, group)
  rates.tats[group] = math.max(group_tat(rates, group), rates.now) + rates.interval
  rates.charged[group] = true
end

-- Parks a message whose group's time has not come, at the back of the group's line; the group waits for it.
local function group_rate_park(rates, group, id)
  park(group, id)
  redis.call('ZADD', K.group_waits, string.format('%.3f', group_tat(rates, group)), group)
end

-- The next parked message of a waiting group and its filter class, taken off the list, when `accepts(class)`;
-- nil when the front one is not accepted, or none is left (the group then stops waiting).
local function take_parked(group, accepts)
  local list = ready_list('#' .. group)
  while true do
    local id = redis.call('LINDEX', list, -1)
    if not id then
      forget_parked(group)
      return nil
    end
    -- Blank entries (removed or debounced messages) and messages gone meanwhile are dropped.
    if id == '' or redis.call('HGET', K.groups, id) ~= group then
      redis.call('RPOP', list)
    else
      local class = class_of(id)
      if not accepts(class) then return nil end
      redis.call('RPOP', list)
      return id, class
    end
  end
end

-- The groups waiting for their parked messages whose time came (at most `count`, earliest first).
local function due_waits(rates, count)
  return redis.call('ZRANGE', K.group_waits, '-inf', rates.now, 'BYSCORE', 'LIMIT', 0, count)
end

-- A waiting group's time is its entry in `group-rates` (another claim may have charged it): rescored so.
local function rewait(rates, group)
  redis.call('ZADD', K.group_waits, 'XX', string.format('%.3f', group_tat(rates, group)), group)
end

-- The first time a waiting group's next message may start after now, or nil.
local function next_wait(rates)
  local first = redis.call('ZRANGE', K.group_waits, '(' .. rates.now, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  if first[2] == nil then return nil end
  return math.ceil(tonumber(first[2]))
end

-- Stores the charged groups' times, and the new time of those of them still waiting.
local function group_rates_end(rates)
  local waiting = redis.call('EXISTS', K.group_waits) == 1
  for group in pairs(rates.charged) do
    local tat = string.format('%.3f', rates.tats[group])
    redis.call('ZADD', K.group_rates, tat, group)
    if waiting then redis.call('ZADD', K.group_waits, 'XX', tat, group) end
  end
end
