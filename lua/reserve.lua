-- reserve.lua: decide the reserves of one flash voucher's gate queued at
-- the same moment, atomically, each as if it ran alone and in order.
--
-- KEYS[1] voucher:{CODE}:stock      remaining uses (its presence means "loaded")
-- KEYS[2] voucher:{CODE}:customers  hash customerId -> uses held
-- KEYS[3] voucher:{CODE}:orders     hash orderId -> "customerId:amount" (live)
--                                   or "customerId:amount:released"; in
--                                   kafka mode "customerId:amount:STATE:createdAt:expiresAt"
--                                   (STATE live, confirmed, releasing or
--                                   released; times in Unix ms)
-- KEYS[4] voucher:{CODE}:paused     present while an operator rebuilds the gate
-- KEYS[5] voucher:{CODE}:meta       hash; its field budget is the budget
--                                   left (absent: the voucher has none),
--                                   room what budgetUsed may still grow
--                                   by before it passes 2^53 - 1
--                                   (voucher.MoneyRoom; absent in a gate
--                                   loaded before it was kept)
-- ARGV[1] n, the number of reserves; then 10 arguments a reserve, the ith's
-- at ARGV[1 + 10*(i-1) + j]:
--   j=1 orderId, 2 customerId, 3 orderAmount, 4 perUserLimit,
--   5 createdAt, 6 expiresAt (Unix ms): given in kafka mode, where the gate,
--     not the database, decides the order's later confirm, release and
--     expiry; empty in sync mode,
--   7 the order's discount (Voucher.DiscountFor), taken from the budget
--     with the use,
--   8 the campaign code reserved (empty for a voucher): a code used up is
--     CODE_USED_UP (the caller's OUT_OF_STOCK), decided with the stock, the
--     customer and the budget,
--   9 the periods of the voucher's period limits (prelude.lua's
--     period_plan; '' without limits), decided after the customer and
--     before the stock: PERIOD_LIMIT_REACHED:LIMIT:END. Their hashes are
--     KEYS[10..], named by index,
--   10 '1' when the discount is not the one the amount gives (appliesTo):
--     it is kept in KEYS[9] for the order's give-backs (prelude.lua's
--     order_discount); else '' (nothing kept).
--
-- A flash campaign has one gate, its voucher row's (CODE = ~C<id>), for all
-- its codes; then also:
-- KEYS[6] voucher:{CODE}:codes       hash campaign code -> uses held or
--                                    confirmed (no zero counts); meta's
--                                    usesPerCode bounds each
-- KEYS[7] voucher:{CODE}:ordercodes  hash orderId -> the campaign code it
--                                    holds a use of (live orders)
-- KEYS[8] voucher:{CODE}:orderperiods hash orderId -> the periods its use
--                                    is counted in (period_take)
-- KEYS[9] voucher:{CODE}:orderdiscounts hash orderId -> its discount, when
--                                    not the amount's (prelude.lua)
--
-- Returns n verdicts of voucher.GateVerdict, in the reserves' order
-- (SUM_TOO_LARGE: a use is left, but the discount would take budgetUsed
-- past 2^53 - 1; checked before the budget). Why a
-- batch: a stampede's winners then cost the gate one script call, and the
-- reads and deadlines every reserve shares (pause, stock, budget, the
-- hashes' deadline) are done once a call. Every check of a reserve runs
-- before its first write, and the only error (a campaign code on a gate
-- that is not a campaign's) is raised before any write, because Redis does
-- not roll a script back on error.

local n = tonumber(ARGV[1])
local verdicts = {}
local function all(verdict)
  for i = 1, n do
    verdicts[i] = verdict
  end
  return verdicts
end

if redis.call('EXISTS', KEYS[4]) == 1 then
  return all('PAUSED')
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return all('NOT_LOADED')
end
stock = tonumber(stock)

local perCode
for i = 1, n do
  local code = ARGV[1 + 10 * (i - 1) + 8]
  if code and code ~= '' then
    perCode = redis.call('HGET', KEYS[5], 'usesPerCode')
    if not perCode then
      return redis.error_reply('GATE_CODES the gate holds no usesPerCode: not a campaign gate')
    end
    perCode = tonumber(perCode)
    break
  end
end
local sums = redis.call('HMGET', KEYS[5], 'budget', 'room')
local budget, room = sums[1], sums[2]
if budget then
  budget = tonumber(budget)
end
if room then
  room = tonumber(room)
end

-- roomTaken is the discounts this call admitted, taken from room in one
-- HINCRBY at the end. Every number compared or summed here is at most
-- 2^53 - 1 (the service refuses larger amounts, room starts there at most
-- and only shrinks by what is admitted), so Lua's doubles hold it exactly.
local taken, campaignTaken, roomTaken = 0, false, 0
local periodsTaken = false
local discountsKept = false

-- decide is one reserve, as the script decided it when it took one: the
-- stock and budget are this call's running counts, the hashes are read and
-- written as it goes, so a later reserve of the batch sees an earlier one.
local function decide(orderID, customerID, amount, perUserLimit, createdAt, expiresAt, discountDigits, campaignCode, periodSpec, keepDiscount)
  local live = customerID .. ':' .. amount
  local known = redis.call('HGET', KEYS[3], orderID)
  if known then
    -- The first two fields say who reserved it; the third, if any, its state.
    local f = fields(known)
    local heldCode = campaignCode ~= '' and redis.call('HGET', KEYS[7], orderID)
    if f[1] .. ':' .. f[2] ~= live or (heldCode and heldCode ~= campaignCode) then
      return 'ORDER_CONFLICT'
    elseif f[3] == 'released' or f[3] == 'releasing' then
      return 'RELEASED'
    end
    return 'DUPLICATE'
  end

  local held = tonumber(redis.call('HGET', KEYS[2], customerID) or '0')
  if held >= tonumber(perUserLimit) then
    return 'ALREADY_USED'
  end
  local at = nil
  if createdAt and createdAt ~= '' then
    at = createdAt
  end
  local refused, periods = period_plan(periodSpec, customerID, at)
  if refused then
    return refused
  end
  if stock <= 0 then
    return 'OUT_OF_STOCK'
  end
  if campaignCode ~= '' then
    if tonumber(redis.call('HGET', KEYS[6], campaignCode) or '0') >= perCode then
      return 'CODE_USED_UP'
    end
  end
  local discount = tonumber(discountDigits or '0')
  if room and room < discount then
    return 'SUM_TOO_LARGE'
  end
  if budget and budget < discount then
    return 'BUDGET_EXHAUSTED'
  end

  stock = stock - 1
  taken = taken + 1
  if budget and discount > 0 then
    budget = budget - discount
    -- The digits as given: Lua's numbers are doubles, Redis's integers 64-bit.
    redis.call('HINCRBY', KEYS[5], 'budget', '-' .. discountDigits)
  end
  if room then
    room = room - discount
    roomTaken = roomTaken + discount
  end
  redis.call('HINCRBY', KEYS[2], customerID, 1)
  if #periods > 0 then
    periodsTaken = true
    period_take(KEYS[8], orderID, periods)
  end
  if keepDiscount == '1' then
    discountsKept = true
    redis.call('HSET', KEYS[9], orderID, discountDigits)
  end
  if campaignCode ~= '' then
    campaignTaken = true
    redis.call('HINCRBY', KEYS[6], campaignCode, 1)
    redis.call('HSET', KEYS[7], orderID, campaignCode)
  end
  if createdAt and createdAt ~= '' then
    redis.call('HSET', KEYS[3], orderID, live .. ':live:' .. createdAt .. ':' .. expiresAt)
  else
    redis.call('HSET', KEYS[3], orderID, live)
  end
  return 'ADMITTED'
end

for i = 1, n do
  local a = 1 + 10 * (i - 1)
  verdicts[i] = decide(ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8] or '', ARGV[a + 9] or '', ARGV[a + 10] or '')
end

if roomTaken > 0 then
  -- %.0f writes an integer double's exact digits (tostring would use an exponent).
  redis.call('HINCRBY', KEYS[5], 'room', string.format('-%.0f', roomTaken))
end
if taken > 0 then
  redis.call('DECRBY', KEYS[1], taken)
  -- The hashes may have just been created (Redis keeps no empty hash): give
  -- them the stock key's deadline so a sold voucher does not outlive it.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('PEXPIRE', KEYS[3], ttl)
    if campaignTaken then
      redis.call('PEXPIRE', KEYS[6], ttl)
      redis.call('PEXPIRE', KEYS[7], ttl)
    end
    if periodsTaken then
      redis.call('PEXPIRE', KEYS[8], ttl)
    end
    if discountsKept then
      redis.call('PEXPIRE', KEYS[9], ttl)
    end
  end
end
return verdicts
