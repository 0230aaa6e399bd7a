-- availability.lua: read what a check (checkVoucher) is decided on, at one
-- moment, changing nothing: a script so that it is auto-pipelined with the
-- reserves of a sale, and costs what a sold-out reserve costs.
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:customers,
-- KEYS[3] voucher:{CODE}:meta (layout in reserve.lua)
-- ARGV[1] customerId
-- KEYS[4] voucher:{CODE}:codes, ARGV[2] a campaign code (a campaign's gate;
--         empty for a voucher): the code's uses left (meta's usesPerCode
--         less its uses held) come fourth, as reserve.lua decides a code
--         used up with the stock.
--
-- Returns {} when the gate holds nothing for the voucher, else
-- {remaining, the customer's uses, budget left or '' for none, room
-- (voucher.MoneyRoom) or '' when not kept[, the code's uses left]}, as
-- strings.

local stock = redis.call('GET', KEYS[1])
if not stock then
  return {}
end
local uses = redis.call('HGET', KEYS[2], ARGV[1]) or '0'
local sums = redis.call('HMGET', KEYS[3], 'budget', 'room')
local budget, room = sums[1] or '', sums[2] or ''
if ARGV[2] and ARGV[2] ~= '' then
  local perCode = redis.call('HGET', KEYS[3], 'usesPerCode')
  if not perCode then
    return redis.error_reply('GATE_CODES the gate holds no usesPerCode: not a campaign gate')
  end
  local left = tonumber(perCode) - tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
  return {stock, uses, budget, room, tostring(left)}
end
return {stock, uses, budget, room}
