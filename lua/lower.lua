-- lower.lua: take up to n uses off a flash voucher's stock counter, never
-- below zero: reconciliation's repair when the gate could admit more than
-- the database allows. Lowering can only undersell, never oversell.
--
-- KEYS[1] voucher:{CODE}:stock
-- KEYS[2] voucher:{CODE}:meta       version: the load's or last raise's
-- ARGV[1] n, ARGV[2] the version the drift was reckoned against
--
-- Returns what remains; 0 when the voucher is not loaded (nothing is created:
-- a stock key alone would pass for a loaded gate without its orders); -1,
-- changing nothing, when the gate was loaded again or raised since (its
-- version differs): the drift was reckoned against another gate, and
-- lowering this one would undo the reload or the extension.

local stock = redis.call('GET', KEYS[1])
if not stock then
  return 0
end
if (redis.call('HGET', KEYS[2], 'version') or '') ~= ARGV[2] then
  return -1
end
local remaining, n = tonumber(stock), tonumber(ARGV[1])
if n <= 0 or remaining <= 0 then
  return remaining
end
return redis.call('DECRBY', KEYS[1], math.min(n, remaining))
