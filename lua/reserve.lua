-- reserve.lua: decide one reserve on a flash voucher's gate, atomically.
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
--                                   left (absent: the voucher has none)
-- ARGV[1] orderId, ARGV[2] customerId, ARGV[3] orderAmount, ARGV[4] perUserLimit
-- ARGV[5] createdAt, ARGV[6] expiresAt (Unix ms): given in kafka mode, where
--         the gate, not the database, decides the order's later confirm,
--         release and expiry; empty in sync mode.
-- ARGV[7] the order's discount (Voucher.DiscountFor), taken from the budget
--         with the use.
--
-- A flash campaign has one gate, its voucher row's (CODE = ~C<id>), for all
-- its codes; then also:
-- KEYS[6] voucher:{CODE}:codes       hash campaign code -> uses held or
--                                    confirmed (no zero counts); meta's
--                                    usesPerCode bounds each
-- KEYS[7] voucher:{CODE}:ordercodes  hash orderId -> the campaign code it
--                                    holds a use of (live orders)
-- ARGV[8] the campaign code reserved (empty for a voucher): a code used up
--         is CODE_USED_UP (the caller's OUT_OF_STOCK), decided with the
--         stock, the customer and the budget in this one script.
--
-- Returns one verdict of voucher.GateVerdict. Every check runs before the
-- first write because Redis does not roll a script back on error.

if redis.call('EXISTS', KEYS[4]) == 1 then
  return 'PAUSED'
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return 'NOT_LOADED'
end

local live = ARGV[2] .. ':' .. ARGV[3]
local known = redis.call('HGET', KEYS[3], ARGV[1])
if known then
  -- The first two fields say who reserved it; the third, if any, its state.
  local f = {}
  for part in string.gmatch(known, '[^:]+') do
    f[#f + 1] = part
  end
  local heldCode = ARGV[8] and ARGV[8] ~= '' and redis.call('HGET', KEYS[7], ARGV[1])
  if f[1] .. ':' .. f[2] ~= live or (heldCode and heldCode ~= ARGV[8]) then
    return 'ORDER_CONFLICT'
  elseif f[3] == 'released' or f[3] == 'releasing' then
    return 'RELEASED'
  end
  return 'DUPLICATE'
end

local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if held >= tonumber(ARGV[4]) then
  return 'ALREADY_USED'
end
if tonumber(stock) <= 0 then
  return 'OUT_OF_STOCK'
end
local campaignCode = ARGV[8] or ''
if campaignCode ~= '' then
  local perCode = redis.call('HGET', KEYS[5], 'usesPerCode')
  if not perCode then
    return redis.error_reply('GATE_CODES the gate holds no usesPerCode: not a campaign gate')
  end
  if tonumber(redis.call('HGET', KEYS[6], campaignCode) or '0') >= tonumber(perCode) then
    return 'CODE_USED_UP'
  end
end
local discount = tonumber(ARGV[7] or '0')
local budget = redis.call('HGET', KEYS[5], 'budget')
if budget and tonumber(budget) < discount then
  return 'BUDGET_EXHAUSTED'
end

redis.call('DECR', KEYS[1])
if budget and discount > 0 then
  -- The digits as given: Lua's numbers are doubles, Redis's integers 64-bit.
  redis.call('HINCRBY', KEYS[5], 'budget', '-' .. ARGV[7])
end
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
if campaignCode ~= '' then
  redis.call('HINCRBY', KEYS[6], campaignCode, 1)
  redis.call('HSET', KEYS[7], ARGV[1], campaignCode)
end
if ARGV[5] and ARGV[5] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[1], live .. ':live:' .. ARGV[5] .. ':' .. ARGV[6])
else
  redis.call('HSET', KEYS[3], ARGV[1], live)
end
-- The hashes may have just been created (Redis keeps no empty hash): give
-- them the stock key's deadline so a sold voucher does not outlive it.
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
  if campaignCode ~= '' then
    redis.call('PEXPIRE', KEYS[6], ttl)
    redis.call('PEXPIRE', KEYS[7], ttl)
  end
end
return 'ADMITTED'
