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
-- KEYS[5..] the hashes of the periods of the voucher's period limits that
--         hold now (reserve.lua), ARGV[3..] the field of each (the
--         customer, or 0 for the voucher scope): their uses come last.
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
local out = {stock, uses, budget, room}
if ARGV[2] and ARGV[2] ~= '' then
  local perCode = redis.call('HGET', KEYS[3], 'usesPerCode')
  if not perCode then
    return redis.error_reply('GATE_CODES the gate holds no usesPerCode: not a campaign gate')
  end
  local left = tonumber(perCode) - tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
  out[5] = tostring(left)
end
for i = 5, #KEYS do
  out[#out + 1] = redis.call('HGET', KEYS[i], ARGV[i - 2]) or '0'
end
return out
