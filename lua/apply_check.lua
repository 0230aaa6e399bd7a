-- apply_check.lua: before the consumer writes events of one flash voucher
-- to the database (kafka mode), ask the gate which of them stand.
--
-- A reserved event stands when the gate holds its admission (same order, same token)
-- as pending (now live: the consumer, not the owner, settled it) or live or
-- further along. It is skipped when the gate holds the order under another
-- token (a retry adopted it), void (its owner or reconciliation gave its use
-- back: it was never answered as a success) or lost. An event of an earlier
-- epoch whose order the reloaded gate does not hold takes a use of the new
-- gate if one is left (re-admitted, live), else is voided here: its owner's
-- finalize (admission.lua) then fails, so it is never answered either.
--
-- A confirmed or released event stands unless the gate has decided the
-- order the other way. Its decision may have been made on a gate reloaded
-- since, its event written after the recovery marker (its publish outcome
-- unknown, so it was never answered as a success: explorer seed 148): the
-- reload then holds the order live, and the event's decision is taken here
-- (a confirm only while the reservation is in time, as confirm.lua), so the
-- gate and the database agree. An order the gate holds released is never
-- confirmed in the database behind its back, nor a confirmed one released
-- (the other decision was answered). Void: never answered, nothing to
-- write. Unknown to the gate, or another admission's: the database decides.
--
-- When the gate is not loaded, or another Redis server holds it, or an
-- order of its own epoch is missing (it lost data), the gate cannot judge:
-- the answer is UNCHECKED for every event, the consumer applies them as
-- they are, and the gate is marked stale so it is rebuilt from the
-- database once these events are in it (the consumer reloads it when it
-- reaches the recovery marker, in the same partition, after them).
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:customers,
-- KEYS[3] voucher:{CODE}:orders, KEYS[4] voucher:{CODE}:meta
-- KEYS[5] voucher:{CODE}:orderdiscounts (prelude.lua): a re-admission keeps
--         its event's discount there, so its give-backs return exactly it
-- KEYS[6] voucher:{CODE}:orderperiods, KEYS[7..] the period hashes the
--         events' period specs name (prelude.lua's period_plan)
-- ARGV[1] n, then n times: orderId, customerId, orderAmount, createdAt,
-- expiresAt, epoch, discount (a re-admission takes it from the budget, if
-- the voucher has one, with the use, or is voided when it does not fit),
-- kind (reserved, confirmed or released), position (the place the gate
-- gave the admission, 0 if none: a re-admission keeps it, and the gate's
-- count of admitted reserves is raised to at least it), and the periods of
-- the voucher's period limits holding createdAt ('' without): a
-- re-admission counts its use in them, or is voided when one is full, as
-- when no use is left
--
-- Returns n answers: APPLY, SKIP, or UNCHECKED (then all are).

local n = tonumber(ARGV[1])
local function all(answer)
  local out = {}
  for i = 1, n do
    out[i] = answer
  end
  return out
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return all('UNCHECKED')
end
local m = redis.call('HMGET', KEYS[4], 'epoch', 'server', 'perUserLimit')
local width = 10 -- ARGV values per event
local function decision(b)
  return ARGV[b + 7] == 'confirmed' or ARGV[b + 7] == 'released'
end
-- Once per batch: a gate on another server than it was loaded on cannot judge.
local server = run_id()
if m[2] ~= server then
  return all('UNCHECKED')
end
-- Missing orders of the gate's own epoch are looked for first: one makes the
-- whole batch unchecked, before anything is written.
for i = 0, n - 1 do
  local b = 2 + width * i
  if not decision(b) and ARGV[b + 5] == m[1] and redis.call('HEXISTS', KEYS[3], ARGV[b]) == 0 then
    redis.call('HSET', KEYS[4], 'server', 'lost-data')
    return all('UNCHECKED')
  end
end

-- decided is the verdict on a confirmed or released event (see above),
-- known the gate's value of its order.
local function decided(id, known, token, kind)
  if not known then
    return 'APPLY'
  end
  local f = fields(known)
  local state = f[3] or 'live'
  if f[4] ~= token then
    return 'APPLY'
  elseif state == 'void' then
    return 'SKIP'
  elseif state == 'confirmed' then
    return kind == 'confirmed' and 'APPLY' or 'SKIP'
  elseif state == 'releasing' or state == 'released' then
    return kind == 'released' and 'APPLY' or 'SKIP'
  elseif state ~= 'live' then
    return 'APPLY' -- pending or lost: the database decides
  end
  local to = 'releasing'
  if kind == 'confirmed' then
    if now_ms() >= tonumber(f[5]) then
      return 'SKIP' -- expired: the sweep releases it
    end
    to = 'confirmed'
  end
  redis.call('HSET', KEYS[3], id, f[1] .. ':' .. f[2] .. ':' .. to .. ':' .. f[4] .. ':' .. f[5] .. placed(f))
  return 'APPLY'
end

local out = {}
for i = 0, n - 1 do
  local b = 2 + width * i
  local id, who, token = ARGV[b], ARGV[b + 1] .. ':' .. ARGV[b + 2], ARGV[b + 3]
  local known = redis.call('HGET', KEYS[3], id)
  if decision(b) then
    out[#out + 1] = decided(id, known, token, ARGV[b + 7])
  elseif known then
    local f = fields(known)
    local state = f[3]
    if f[4] ~= token or f[1] .. ':' .. f[2] ~= who or state == 'void' or state == 'lost' then
      out[#out + 1] = 'SKIP'
    else
      if state == 'pending' then
        redis.call('HSET', KEYS[3], id, f[1] .. ':' .. f[2] .. ':live:' .. f[4] .. ':' .. f[5] .. placed(f))
      end
      out[#out + 1] = 'APPLY'
    end
  else
    -- An admission of an earlier epoch the reload did not see.
    local held = tonumber(redis.call('HGET', KEYS[2], ARGV[b + 1]) or '0')
    local stock = tonumber(redis.call('GET', KEYS[1]))
    local sums = redis.call('HMGET', KEYS[4], 'budget', 'room')
    local budget, room = sums[1], sums[2]
    local discount = tonumber(ARGV[b + 6])
    -- Its periods are those holding its createdAt (its token): full, or
    -- not offered, it is voided as when no use is left.
    local refused, periods = period_plan(ARGV[b + 9], ARGV[b + 1], token)
    if not refused and stock > 0 and held < tonumber(m[3]) and (not budget or tonumber(budget) >= discount)
      and (not room or tonumber(room) >= discount) then
      redis.call('DECR', KEYS[1])
      if #periods > 0 then
        period_take(KEYS[6], id, periods)
        live_as_stock(KEYS[6], KEYS[1])
      end
      if budget and discount > 0 then
        redis.call('HINCRBY', KEYS[4], 'budget', '-' .. ARGV[b + 6])
      end
      if room and discount > 0 then
        redis.call('HINCRBY', KEYS[4], 'room', '-' .. ARGV[b + 6])
      end
      redis.call('HINCRBY', KEYS[2], ARGV[b + 1], 1)
      local place = ''
      local position = tonumber(ARGV[b + 8])
      if position > 0 then
        place = ':' .. ARGV[b + 8]
        -- (A gate without the count gives no numbers: left so.)
        local count = redis.call('HGET', KEYS[4], 'admitted')
        if count and position > tonumber(count) then
          redis.call('HSET', KEYS[4], 'admitted', ARGV[b + 8])
        end
      end
      redis.call('HSET', KEYS[3], id, who .. ':live:' .. token .. ':' .. ARGV[b + 4] .. place)
      if KEYS[5] then
        -- Kept whatever it is (this script does not know the voucher's
        -- terms): the record is the discount the use took. A rare path.
        redis.call('HSET', KEYS[5], id, ARGV[b + 6])
        live_as_stock(KEYS[5], KEYS[1])
      end
      out[#out + 1] = 'APPLY'
    else
      redis.call('HSET', KEYS[3], id, who .. ':void:' .. token .. ':' .. ARGV[b + 4])
      out[#out + 1] = 'SKIP'
    end
  end
end
return out
