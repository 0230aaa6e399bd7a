-- release.lua: give an order's use back to a flash voucher's gate.
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:customers,
-- KEYS[3] voucher:{CODE}:orders (layout in reserve.lua)
-- KEYS[4] voucher:{CODE}:meta: its budget and room fields (if any) get
--         ARGV[3] back
-- ARGV[1] orderId
-- ARGV[2] 'release' (default): mark the order released, so a retry of it is
--         answered RELEASED; 'forget': delete the order, so a retry is
--         decided from scratch (the database refused it, or it never reached
--         the database: it holds no reservation to answer a retry with);
--         'drop': as forget, but the use is not given back: the database
--         refused the order as sold out although the gate admitted it, so
--         the gate was one use too high (a rebuild raced winners in
--         flight). Giving it back would keep the gate too high and send
--         every later request to the database; dropping it converges.
-- ARGV[3] the order's discount, given back to the budget with the use,
--         unless KEYS[8] keeps the order's own (prelude.lua's
--         order_discount: a voucher with appliesTo), which goes back instead.
-- KEYS[5] voucher:{CODE}:codes, KEYS[6] voucher:{CODE}:ordercodes (a
--         campaign's gate, reserve.lua): the campaign code the order holds
--         gets its use back too, except in mode 'dropcode': the database
--         refused the order because that code is used up, so the gate's
--         count of the code was too low; the campaign's use, the customer's
--         and the budget go back, the code's stays taken (converges).
--         In mode 'drop' the code's use does go back: the database had
--         room on the code and refused the campaign's use.
--
-- KEYS[7] voucher:{CODE}:orderperiods: the periods the order's use was
--         counted in (reserve.lua, admit.lua) get it back, in every mode:
--         the database took none (forget, drop, dropcode) or gave it back.
-- KEYS[8] voucher:{CODE}:orderdiscounts: the order's discount when it is not
--         the one its amount gives; deleted with the order (forget, drop,
--         dropcode), kept with a released one (a retry's answer names it).
--
-- Returns 1 when this call took the order out of the live set and gave its
-- use back, 0 otherwise: the voucher is not loaded (a later load rebuilds it
-- from the database), the order is unknown (it took no use here), or it was
-- released before (nothing is given back twice).
--
-- In kafka mode an order's value carries a state (reserve.lua): live,
-- confirmed and releasing all hold a use here. This script runs there only
-- once the database has released the order (the consumer applied the
-- release, or the expiry sweep released the row), so whatever the gate's
-- state, the database no longer counts the use and the gate may give it back.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local known = redis.call('HGET', KEYS[3], ARGV[1])
if not known then
  return 0
end
local f = fields(known)
if f[3] == 'released' or f[3] == 'void' or f[3] == 'lost' then
  return 0 -- given back before, or (void) never held, or (lost) kept on purpose
end

local customer = f[1]
local mode = ARGV[2]
local discount = order_discount(KEYS[8], ARGV[1], ARGV[3])
local code = KEYS[6] and redis.call('HGET', KEYS[6], ARGV[1])
if code then
  redis.call('HDEL', KEYS[6], ARGV[1])
  if mode ~= 'dropcode' and redis.call('HINCRBY', KEYS[5], code, -1) <= 0 then
    redis.call('HDEL', KEYS[5], code)
  end
end
if mode == 'forget' or mode == 'drop' or mode == 'dropcode' then
  redis.call('HDEL', KEYS[3], ARGV[1])
  if KEYS[8] then
    redis.call('HDEL', KEYS[8], ARGV[1])
  end
elseif f[4] then
  redis.call('HSET', KEYS[3], ARGV[1], f[1] .. ':' .. f[2] .. ':released:' .. f[4] .. ':' .. f[5] .. placed(f))
else
  redis.call('HSET', KEYS[3], ARGV[1], known .. ':released')
end
if mode ~= 'drop' then
  redis.call('INCR', KEYS[1])
  -- Every instance drops its sold-out snapshot of the voucher at once (the
  -- gate's ListenReleased), in the same script as the give-back, so no
  -- give-back goes unannounced and a winner of the returned use is never
  -- refused from memory on its retry.
  redis.call('PUBLISH', 'voucher:released', string.match(KEYS[1], '^voucher:{(.*)}:stock$'))
end
if discount and discount ~= '0' and redis.call('HEXISTS', KEYS[4], 'budget') == 1 then
  redis.call('HINCRBY', KEYS[4], 'budget', discount)
end
if discount and discount ~= '0' and redis.call('HEXISTS', KEYS[4], 'room') == 1 then
  redis.call('HINCRBY', KEYS[4], 'room', discount)
end
if redis.call('HINCRBY', KEYS[2], customer, -1) <= 0 then
  redis.call('HDEL', KEYS[2], customer)
end
period_give_back(KEYS[7], ARGV[1])
return 1
