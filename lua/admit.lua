-- admit.lua: decide one reserve on a flash voucher's gate in kafka mode,
-- atomically, on the gate's own clock.
--
-- In kafka mode the gate is the decision point of a flash reservation: the
-- database learns of it only when the consumer applies its event. An
-- admission is therefore only a claim until its owner (the request that made
-- it) has its event acknowledged by the broker and settles it with
-- admission.lua, or the consumer applies the event (apply_check.lua),
-- whichever comes first. Until then it is "pending" and only its owner may
-- give its use back (compare-and-set on its token, the createdAt below), so
-- a retry of the order can never answer success for a use that its first
-- request gives back.
--
-- KEYS[1] voucher:{CODE}:stock      remaining uses (its presence means "loaded")
-- KEYS[2] voucher:{CODE}:customers  hash customerId -> uses held
-- KEYS[3] voucher:{CODE}:orders     hash orderId -> "customerId:amount:STATE:createdAt:expiresAt"
--                                   STATE pending, live, confirmed, releasing,
--                                   released, void or lost; times in Unix ms
--                                   on the gate's clock; createdAt is the
--                                   admission's token (unique per order);
--                                   then ":position", the order's place among
--                                   the voucher's admitted reserves (absent
--                                   in a value written before they were kept)
-- KEYS[4] voucher:{CODE}:meta       hash perUserLimit, epoch, server, startsAt,
--                                   endsAt, minOrder, ttl, lease (load.lua),
--                                   budget (left) for a voucher with one,
--                                   room (voucher.MoneyRoom; absent in a
--                                   gate loaded before it was kept),
--                                   admitted: the last position given (the
--                                   database's admitted_count at the load,
--                                   raised by one at each admission; never
--                                   lowered, so a number is never given
--                                   twice); absent in a gate loaded before
--                                   positions were kept, which then gives
--                                   none (the consumer numbers the rows)
-- KEYS[5] voucher:{CODE}:paused     present while the gate is rebuilt
-- KEYS[6] voucher:{CODE}:orderperiods hash orderId -> the periods its use
--                                   is counted in (prelude.lua's period_take)
-- KEYS[7] voucher:{CODE}:orderdiscounts hash orderId -> its discount, when
--                                   not the one its amount gives (prelude.lua)
-- KEYS[8..] order:{ORDERID}        (on a single Redis: the orderIds' claims
--                                   across vouchers, one per admission below,
--                                   as order_claim.lua keeps them; on a
--                                   cluster they live in other slots and the
--                                   caller claims each in a call of its own)
-- ARGV[1] n, the number of reserves decided by this call (the reserves of one
--         voucher queued at the same moment are decided together: one script
--         for many), ARGV[2] the voucher's code and ARGV[3] the claims' life
--         in ms (with KEYS[8..]), then ARGV[4] c, how many claim keys
--         follow KEYS[7] (n, or 0 on a cluster), then n groups of six:
--         orderId, customerId, orderAmount, the order's discount
--         (Voucher.DiscountFor), taken from the budget with the use (an
--         adopted admission keeps the one it took), and the periods of the
--         voucher's period limits (prelude.lua's period_plan; '' without):
--         the use counts in the period holding its createdAt, decided after
--         ALREADY_USED and before OUT_OF_STOCK; their hashes are KEYS[8 + c..];
--         and '1' when the discount is not the one the amount gives
--         (appliesTo): kept in KEYS[7] with the admission, else ''
-- Each reserve is decided exactly as if it had a call of its own, in order.
--
-- Returns, for each reserve, {verdict, the order's value after the call ('' if none), epoch,
-- the order's kept discount ('' if none: its amount's)}
-- (4n values), then this Redis server's run_id ('' when the gate is paused
-- or not loaded): the server the claims of KEYS[8..] were read on.
-- Verdicts: PAUSED, NOT_LOADED, STALE, CLAIMED_ELSEWHERE (with KEYS[7..]: the
-- orderId is claimed by another voucher; nothing taken) (the gate's data may be older than
-- what it answered before: another Redis server holds it now, see load.lua),
-- PERIOD_LIMIT_REACHED:LIMIT:END (reserve.lua), ORDER_CONFLICT, RELEASED, LOST, PENDING (the order's first admission is
-- still being settled by its owner), DUPLICATE (live or confirmed),
-- NOT_ELIGIBLE, ALREADY_USED, OUT_OF_STOCK, SUM_TOO_LARGE (a use is left,
-- the discount would take budgetUsed past 2^53 - 1), BUDGET_EXHAUSTED (a
-- use is left, the budget cannot cover the discount), ADMITTED (one use
-- taken, pending)
-- and ADOPTED (a pending admission whose owner outlived its lease: this
-- caller is its owner now, with a new token; no second use is taken).
-- Every check runs before the first write: Redis does not roll a script back.

local n, code, claimLife = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local out = {}
local function answerAll(verdict, epoch, server)
  for _ = 1, n do
    out[#out + 1] = verdict
    out[#out + 1] = ''
    out[#out + 1] = epoch
    out[#out + 1] = ''
  end
  out[#out + 1] = server or ''
  return out
end

local stock = redis.call('GET', KEYS[1])
local m = redis.call('HMGET', KEYS[4], 'perUserLimit', 'epoch', 'server', 'startsAt', 'endsAt', 'minOrder', 'ttl', 'lease', 'budget', 'room', 'admitted')
local epoch = m[2] or ''
local server = run_id()
-- A gate loaded on another Redis server is STALE even while paused: a pause
-- it holds came with its data (a failover) and only a reload lifts it, which
-- STALE asks for (explorer seed 13).
if stock and m[3] ~= server then
  return answerAll('STALE', epoch, server)
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  return answerAll('PAUSED', '')
end
if not stock then
  return answerAll('NOT_LOADED', '')
end
stock = tonumber(stock)
local now = now_ms()
local ttl, lease = tonumber(m[7]), tonumber(m[8])
local limit, startsAt, endsAt, minOrder = tonumber(m[1]), tonumber(m[4]), tonumber(m[5]), tonumber(m[6])
local budget = m[9] and tonumber(m[9])
-- room: what budgetUsed may still grow by before it passes 2^53 - 1
-- (voucher.MoneyRoom); roomTaken, this call's admitted discounts, leave it
-- in one HINCRBY at the end. Every number here is at most 2^53 - 1, exact
-- in Lua's doubles.
local room = m[10] and tonumber(m[10])
local roomTaken = 0
local admitted = false

-- decide decides one reserve; stock and budget are kept here as they change.
local function decide(orderId, customerId, orderAmount, discountArg, claim, periodSpec, keepDiscount)
  local who = customerId .. ':' .. orderAmount
  local known = redis.call('HGET', KEYS[3], orderId)
  local after = 0 -- a new token must be later than a voided one's
  if known then
    local f = fields(known)
    local state = f[3]
    if f[1] .. ':' .. f[2] ~= who and state == 'pending' then
      -- Another request's admission of the orderId, not yet answered: it
      -- may still be given back, so a conflict now could be with an order
      -- no voucher ends up holding (explorer seed 125). Decided once it is
      -- settled: a conflict if it went live, afresh if it was voided.
      return 'PENDING', known
    elseif f[1] .. ':' .. f[2] ~= who and state ~= 'void' then
      return 'ORDER_CONFLICT', known
    elseif state == 'released' or state == 'releasing' then
      return 'RELEASED', known
    elseif state == 'lost' then
      return 'LOST', known
    elseif state == 'pending' then
      if now - tonumber(f[4]) < lease then
        return 'PENDING', known
      end
      local created = math.max(now, tonumber(f[4]) + 1)
      -- The same admission, a new owner: its place stays.
      local adopted = who .. ':pending:' .. created .. ':' .. (created + ttl) .. placed(f)
      redis.call('HSET', KEYS[3], orderId, adopted)
      return 'ADOPTED', adopted
    elseif state ~= 'void' then
      if state == 'live' and f[5] and now >= tonumber(f[5]) then
        -- Past its expiresAt on this clock, its sweep not yet run: a retry
        -- is answered as the confirm is (confirm.lua), not as a live order
        -- (explorer seed 181).
        return 'RELEASED', known
      end
      return 'DUPLICATE', known
    end
    after = tonumber(f[4]) + 1 -- void: decided afresh
  end

  if claim then
    local owner = redis.call('GET', claim)
    if owner and owner ~= code then
      return 'CLAIMED_ELSEWHERE', ''
    end
  end
  if now < startsAt or now >= endsAt or tonumber(orderAmount) < minOrder then
    return 'NOT_ELIGIBLE', ''
  end
  local held = tonumber(redis.call('HGET', KEYS[2], customerId) or '0')
  if held >= limit then
    return 'ALREADY_USED', ''
  end
  local created = math.max(now, after)
  local refused, periods = period_plan(periodSpec, customerId, created)
  if refused then
    return refused, ''
  end
  if stock <= 0 then
    return 'OUT_OF_STOCK', ''
  end
  local discount = tonumber(discountArg or '0')
  if room and room < discount then
    return 'SUM_TOO_LARGE', ''
  end
  if budget and budget < discount then
    return 'BUDGET_EXHAUSTED', ''
  end

  -- Its place: the next number of the voucher's admitted reserves (a
  -- voided admission, never answered, leaves its number unused; the same
  -- order admitted again gets the next). A gate loaded before the numbers were
  -- kept does not know where they stand: it gives none, rather than
  -- numbers the database gave already.
  local place = ''
  if m[11] then
    place = ':' .. redis.call('HINCRBY', KEYS[4], 'admitted', 1)
  end
  local value = who .. ':pending:' .. created .. ':' .. (created + ttl) .. place
  redis.call('DECR', KEYS[1])
  stock = stock - 1
  if budget and discount > 0 then
    -- The digits as given: Lua's numbers are doubles, Redis's integers 64-bit.
    redis.call('HINCRBY', KEYS[4], 'budget', '-' .. discountArg)
    budget = budget - discount
  end
  if room then
    room = room - discount
    roomTaken = roomTaken + discount
  end
  redis.call('HINCRBY', KEYS[2], customerId, 1)
  redis.call('HSET', KEYS[3], orderId, value)
  if keepDiscount == '1' then
    redis.call('HSET', KEYS[7], orderId, discountArg)
  elseif after > 0 then
    -- A void admission's record, if any, is not this one's.
    redis.call('HDEL', KEYS[7], orderId)
  end
  if #periods > 0 then
    period_take(KEYS[6], orderId, periods)
  end
  if claim then
    redis.call('SET', claim, code, 'PX', claimLife)
  end
  admitted = true
  return 'ADMITTED', value
end

local claims = tonumber(ARGV[4])
for i = 0, n - 1 do
  local a = 5 + 6 * i
  local claim = nil
  if i < claims then
    claim = KEYS[8 + i]
  end
  local verdict, value = decide(ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], claim, ARGV[a + 4], ARGV[a + 5])
  out[#out + 1] = verdict
  out[#out + 1] = value
  out[#out + 1] = epoch
  local kept = ''
  if value ~= '' then
    kept = redis.call('HGET', KEYS[7], ARGV[a]) or ''
  end
  out[#out + 1] = kept
end
out[#out + 1] = server
if roomTaken > 0 then
  -- %.0f writes an integer double's exact digits (tostring would use an exponent).
  redis.call('HINCRBY', KEYS[4], 'room', string.format('-%.0f', roomTaken))
end
-- The hashes may have just been created (Redis keeps no empty hash): give
-- them the stock key's deadline, once.
if admitted then
  for _, key in ipairs({KEYS[2], KEYS[3], KEYS[6], KEYS[7]}) do
    live_as_stock(key, KEYS[1])
  end
end
return out
