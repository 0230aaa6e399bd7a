-- availability.lua: read what a check (checkVoucher) is decided on, at one
-- moment, changing nothing: a script so that it is auto-pipelined with the
-- reserves of a sale, and costs what a sold-out reserve costs.
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:customers,
-- KEYS[3] voucher:{CODE}:meta (layout in reserve.lua)
-- ARGV[1] customerId
--
-- Returns {} when the gate holds nothing for the voucher, else
-- {remaining, the customer's uses, budget left or '' for none}, as strings.

local stock = redis.call('GET', KEYS[1])
if not stock then
  return {}
end
local uses = redis.call('HGET', KEYS[2], ARGV[1]) or '0'
local budget = redis.call('HGET', KEYS[3], 'budget') or ''
return {stock, uses, budget}
