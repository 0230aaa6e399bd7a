-- lower.lua: take up to n uses off a flash voucher's stock counter, never
-- below zero: reconciliation's repair when the gate could admit more than
-- the database allows. Lowering can only undersell, never oversell.
--
-- KEYS[1] voucher:{CODE}:stock
-- ARGV[1] n
--
-- Returns what remains; 0 when the voucher is not loaded (nothing is created:
-- a stock key alone would pass for a loaded gate without its orders).

local stock = redis.call('GET', KEYS[1])
if not stock then
  return 0
end
local remaining, n = tonumber(stock), tonumber(ARGV[1])
if n <= 0 or remaining <= 0 then
  return remaining
end
return redis.call('DECRBY', KEYS[1], math.min(n, remaining))
