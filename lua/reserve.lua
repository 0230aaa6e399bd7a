-- reserve.lua: decide one reserve on a flash voucher's gate, atomically.
--
-- KEYS[1] voucher:{CODE}:stock      remaining uses (its presence means "loaded")
-- KEYS[2] voucher:{CODE}:customers  hash customerId -> uses held
-- KEYS[3] voucher:{CODE}:orders     hash orderId -> "customerId:amount" (live)
--                                   or "customerId:amount:released"
-- KEYS[4] voucher:{CODE}:paused     present while an operator rebuilds the gate
-- ARGV[1] orderId, ARGV[2] customerId, ARGV[3] orderAmount, ARGV[4] perUserLimit
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
  if known == live then
    return 'DUPLICATE'
  elseif known == live .. ':released' then
    return 'RELEASED'
  end
  return 'ORDER_CONFLICT'
end

local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if held >= tonumber(ARGV[4]) then
  return 'ALREADY_USED'
end
if tonumber(stock) <= 0 then
  return 'OUT_OF_STOCK'
end

redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HSET', KEYS[3], ARGV[1], live)
-- The hashes may have just been created (Redis keeps no empty hash): give
-- them the stock key's deadline so a sold voucher does not outlive it.
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return 'ADMITTED'
