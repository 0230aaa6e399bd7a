-- extend.lua: keep a flash voucher's gate in step with a voucher whose total
-- was raised or whose end moved later in the database (extendVoucher), in
-- one atomic step. The database has committed the change first; this adds
-- exactly the difference to the stock and moves the window and the keys'
-- expiry, never the other way.
--
-- KEYS[1] voucher:{CODE}:stock      present means "loaded"
-- KEYS[2] voucher:{CODE}:customers
-- KEYS[3] voucher:{CODE}:orders
-- KEYS[4] voucher:{CODE}:meta       total: the totalLimit the stock was loaded
--                                   or last raised with (load.lua writes it);
--                                   endsAt/offset in kafka mode; expireAt;
--                                   version, new when the stock is raised
-- KEYS[5..] the hashes that expire with the orders hash: codes,
--           ordercodes, orderperiods, orderdiscounts (those present)
-- ARGV[1] the total before the change, ARGV[2] the total after it
-- ARGV[3] endsAt before, ARGV[4] endsAt after (Unix ms, the database's clock)
-- ARGV[5] the new expireAt (Unix ms)
--
-- Why the gate remembers its total: the stock is raised by new - total, so a
-- gate loaded from a snapshot read after the database's change (it holds the
-- new total already) is not raised twice, and two extensions arriving out of
-- order never lower it. The new total is also kept as "raised": a load (or
-- an operator's rebuild) whose snapshot was read before the change but
-- installed after this call adds the difference then (load.lua), so the
-- race with a load ends in the right stock either way.
--
-- Returns 1 when the gate was loaded and is in step now, 0 when it holds
-- nothing (the next load reads the database).

local stock, customers, orders, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local newTotal = tonumber(ARGV[2])

-- The new total stays in meta as "raised" until the next load replaces
-- meta: a load or rebuild whose snapshot was read before the database's
-- change but is installed after this call adds the difference then.
local raised = tonumber(redis.call('HGET', meta, 'raised') or '0')
if newTotal > raised then
  redis.call('HSET', meta, 'raised', newTotal)
end
if redis.call('EXISTS', stock) == 0 then
  if redis.call('PTTL', meta) < 0 then
    redis.call('PEXPIRE', meta, 600000)
  end
  return 0
end

local total = tonumber(redis.call('HGET', meta, 'total') or ARGV[1])
if newTotal > total then
  redis.call('INCRBY', stock, newTotal - total)
  local t = redis.call('TIME')
  -- A new version: a reconciliation pass whose snapshots were read before
  -- this raise must not lower the stock by a drift they reckoned (lower.lua).
  redis.call('HSET', meta, 'total', newTotal, 'version', t[1] .. '.' .. t[2])
end

-- Kafka mode decides the window at the gate, on this server's clock: the
-- database's end shifted by the offset load.lua measured.
local ends = redis.call('HGET', meta, 'endsAt')
if ends then
  local offset = redis.call('HGET', meta, 'offset')
  if offset then
    offset = tonumber(offset)
  else
    offset = tonumber(ends) - tonumber(ARGV[3])
  end
  local moved = tonumber(ARGV[4]) + offset
  if moved > tonumber(ends) then
    redis.call('HSET', meta, 'endsAt', moved)
  end
end

local expireAt = tonumber(ARGV[5])
local was = tonumber(redis.call('HGET', meta, 'expireAt') or '0')
if was > 0 and expireAt > was then
  redis.call('HSET', meta, 'expireAt', expireAt)
  for _, key in ipairs({stock, customers, orders, meta}) do
    redis.call('PEXPIREAT', key, expireAt)
  end
  -- KEYS[5..]: the hashes that live as long as the orders hash (load.lua
  -- gives them its deadline), moved with it so a campaign's codes, an
  -- order's periods and its own discount outlive the old deadline too.
  for i = 5, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      redis.call('PEXPIREAT', KEYS[i], expireAt)
    end
  end
end
return 1
