-- prelude.lua: small functions the gate's scripts share. lua.go prepends
-- this file to each script that uses them, so a script runs as one piece in
-- Redis (its KEYS and ARGV are the script's own; these read only what they
-- are given). Only local functions here: nothing runs before the script.

-- run_id is this Redis server's run_id (INFO server).
local function run_id()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
end

-- stale: the meta hash names a server (load.lua stores it) other than this one.
local function stale(meta)
  local server = redis.call('HGET', meta, 'server')
  return server and server ~= run_id()
end

-- now_ms is this Redis server's clock (TIME) in Unix milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- fields splits an order's value on ':': customerId, amount[, STATE, createdAt, expiresAt[, position]].
local function fields(value)
  local f = {}
  for part in string.gmatch(value, '[^:]+') do
    f[#f + 1] = part
  end
  return f
end

-- placed is the ':position' an order's value ends with in kafka mode (its
-- place among the voucher's admitted reserves, given by admit.lua), '' for
-- a value without one; every script that rewrites a value keeps it.
local function placed(f)
  if f[6] then
    return ':' .. f[6]
  end
  return ''
end

-- settled runs confirm.lua's and mark_released.lua's shared checks, in order:
-- an answer {verdict, value} when they decide, else nil, the value, its fields.
local function settled(stock, orders, paused, meta, orderId)
  -- STALE before PAUSED: a pause on a gate loaded on another server came
  -- with its data (a failover); only the reload STALE asks for lifts it.
  local loaded = redis.call('EXISTS', stock) == 1
  if loaded and stale(meta) then
    return {'STALE', ''}
  end
  if redis.call('EXISTS', paused) == 1 then
    return {'PAUSED', ''}
  end
  if not loaded then
    return {'NOT_LOADED', ''}
  end
  local known = redis.call('HGET', orders, orderId)
  if not known then
    return {'UNKNOWN', ''}
  end
  local f = fields(known)
  local state = f[3] or 'live'
  if state == 'void' or state == 'lost' then
    return {'UNKNOWN', ''}
  elseif state == 'pending' then
    return {'PENDING', known}
  end
  if state == 'released' or state == 'releasing' then
    return {'RELEASED', known}
  end
  if not f[4] then
    return {'LEGACY', known}
  end
  if state == 'confirmed' then
    return {'CONFIRMED', known}
  end
  return nil, known, f
end
