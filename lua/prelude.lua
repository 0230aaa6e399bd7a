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

-- live_as_stock gives key the stock key's deadline when it has none: a
-- hash a script has just created (Redis keeps no empty hash) does not
-- outlive the gate it belongs to.
local function live_as_stock(key, stock)
  if redis.call('PTTL', key) == -1 then
    local pttl = redis.call('PTTL', stock)
    if pttl > 0 then
      redis.call('PEXPIRE', key, pttl)
    end
  end
end

-- Period limits (voucher.GatePeriod): a reserve's periods come as one
-- argument, 'AT;LIMIT,KEY,KIND,START,END,MAX;...' ('' for a voucher without
-- limits): AT the moment the caller counts the use at (Unix ms), then one
-- entry per period offered: the limit's index, the KEYS index of its hash
-- (voucher:{CODE}:period:SCOPE:PERIOD:START, customer -> uses, '0' for the
-- voucher scope), KIND 'c' (CUSTOMER) or 'v' (VOUCHER), its bounds (Unix
-- ms) and the limit's max. A period's hash expires periodGrace after its end.
local periodGrace = 3600000

-- period_plan decides a reserve's period limits at the moment at (the
-- kafka path's createdAt on this server's clock) or, when at is nil, the
-- argument's AT: per limit, the offered period holding it. It returns a
-- verdict when refused: 'PERIOD_LIMIT_REACHED:LIMIT:END' naming the
-- refusing limit whose period ends last, or 'PAUSED' when no offered period
-- of a limit holds the moment (the caller's clock is too far from this
-- server's: a retry offers others). Else nil and the periods to take, each
-- {key, field, end}. It only reads.
local function period_plan(spec, customer, at)
  if not spec or spec == '' then
    return nil, {}
  end
  local t, found, chosen = nil, {}, {}
  local refusedLimit, refusedEnd
  for part in string.gmatch(spec, '[^;]+') do
    if not t then
      t = tonumber(at) or tonumber(part)
    else
      local c = {}
      for x in string.gmatch(part, '[^,]+') do
        c[#c + 1] = x
      end
      local limit, key, s, e, max = c[1], KEYS[tonumber(c[2])], tonumber(c[4]), tonumber(c[5]), tonumber(c[6])
      found[limit] = found[limit] or false
      if s <= t and t < e then
        found[limit] = true
        local field = '0'
        if c[3] == 'c' then
          field = customer
        end
        chosen[#chosen + 1] = {key, field, e}
        if tonumber(redis.call('HGET', key, field) or '0') >= max and (not refusedEnd or e > refusedEnd) then
          refusedLimit, refusedEnd = limit, e
        end
      end
    end
  end
  for _, ok in pairs(found) do
    if not ok then
      return 'PAUSED'
    end
  end
  if refusedLimit then
    return 'PERIOD_LIMIT_REACHED:' .. refusedLimit .. ':' .. string.format('%.0f', refusedEnd)
  end
  return nil, chosen
end

-- period_take takes a use in each period of chosen (period_plan's) and
-- remembers them under the order in orderPeriods (hash orderId ->
-- 'FIELD|KEY' lines), so whichever script gives the use back gives it to
-- the periods it was taken in, not the current ones.
local function period_take(orderPeriods, orderId, chosen)
  if not chosen or #chosen == 0 then
    return
  end
  local held = {}
  for _, c in ipairs(chosen) do
    redis.call('HINCRBY', c[1], c[2], 1)
    redis.call('PEXPIREAT', c[1], string.format('%.0f', c[3] + periodGrace))
    held[#held + 1] = c[2] .. '|' .. c[1]
  end
  redis.call('HSET', orderPeriods, orderId, table.concat(held, '\n'))
end

-- period_give_back gives an order's period uses back (period_take's), once:
-- the record goes with it. A period whose hash expired (over, or a gate
-- loaded without it) is left alone.
local function period_give_back(orderPeriods, orderId)
  if not orderPeriods then
    return
  end
  local held = redis.call('HGET', orderPeriods, orderId)
  if not held then
    return
  end
  redis.call('HDEL', orderPeriods, orderId)
  for line in string.gmatch(held, '[^\n]+') do
    local field, key = string.match(line, '^([^|]*)|(.*)$')
    if field and redis.call('HEXISTS', key, field) == 1 and redis.call('HINCRBY', key, field, -1) <= 0 then
      redis.call('HDEL', key, field)
    end
  end
end

-- Order discounts: voucher:{CODE}:orderdiscounts, hash orderId -> the
-- discount (digits) its use took from the budget, kept only for an order
-- whose discount is not the one its amount gives (Voucher.DiscountFor):
-- a voucher with appliesTo takes it on the eligible items' subtotal, which
-- the order's value ("customerId:amount...") does not hold. A separate hash
-- rather than another field of the value: every script compares
-- f[1]..':'..f[2] as the order's identity and reads the state, times and
-- position by place, and a value written before this change (or by a
-- script that does not know it) stays exactly as it was. An order without
-- a record gives back the discount the caller passes (DiscountFor of its
-- amount), as before. Same hash tag, same expiry as the orders hash.

-- order_discount is the discount an order gives back: its record, else
-- given (the caller's).
local function order_discount(orderDiscounts, orderId, given)
  if orderDiscounts then
    local d = redis.call('HGET', orderDiscounts, orderId)
    if d then
      return d
    end
  end
  return given
end
