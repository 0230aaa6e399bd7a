-- load.lua: install a snapshot of a flash voucher's gate in one atomic step.
--
-- Mode "load" (warm-up) installs it only if the gate holds nothing for the
-- voucher, so it never raises a loaded gate: a loaded counter may be lower
-- than the database says, never higher. Mode "replace" (an operator's
-- rebuild, done while reserves are paused) installs it over whatever the
-- gate holds and lifts the pause.
--
-- KEYS[1] voucher:{CODE}:stock      written last; its presence means "loaded"
-- KEYS[2] voucher:{CODE}:customers  hash customerId -> uses held
-- KEYS[3] voucher:{CODE}:orders     hash orderId -> "customerId:amount[:released]"
-- KEYS[4] voucher:{CODE}:meta       hash perUserLimit, expireAt (Unix ms),
--                                   total (the totalLimit the stock stands
--                                   for, when given) and, for a voucher with
--                                   a budget, budget (left); room, what
--                                   budgetUsed may still grow by
--                                   (voucher.MoneyRoom), when given
-- KEYS[5] voucher:{CODE}:load:TOKEN:customers  staged by stage.lua (may be absent)
-- KEYS[6] voucher:{CODE}:load:TOKEN:orders     staged by stage.lua (may be absent)
-- KEYS[7] voucher:{CODE}:paused
-- KEYS[12] voucher:{CODE}:markers  sorted set: the epochs of kafka-mode
--          rebuilds whose markers are published (marker.lua), scored by
--          when they stop counting (Unix ms)
-- KEYS[13] voucher:{CODE}:orderperiods  hash orderId -> the periods its use
--          is counted in (prelude.lua's period_take)
-- KEYS[14] voucher:{CODE}:orderdiscounts  hash orderId -> the discount of a
--          live order whose discount is not its amount's (prelude.lua's
--          order_discount): meta pair 'orderDiscounts', 'orderId' \31
--          discount, separated by \30; replaced whole, expiring with the
--          orders hash
-- KEYS[15..] the hashes of the periods of the voucher's period limits
--          loaded (voucher:{CODE}:period:SCOPE:PERIOD:START), each replaced
--          whole: meta pair 'periods' gives, one line each, its KEYS index,
--          its end (Unix ms) and its counts 'field=uses,...' (customer, or 0
--          for the voucher scope); 'orderPeriods' the live orders' records,
--          'orderId' \31 record, separated by \30.
-- ARGV[1] "load" or "replace"
-- ARGV[2] remaining, ARGV[3] perUserLimit, ARGV[4] expireAt in Unix ms (0: never)
-- ARGV[5] how many customers were staged, ARGV[6] how many orders were staged
-- ARGV[7] k, then k meta pairs (field, value) for kafka mode: epoch (this
--         load's id), startsAt, endsAt and dbNow (Unix ms on the database's
--         clock), minOrder, ttl and lease (ms). The window is stored on this
--         server's clock: shifted by TIME - dbNow, so admit.lua decides it
--         within the time between the snapshot and this call of the
--         database's clock. The server's run_id is stored too: a gate read
--         on another server (a failover, a restart that restored older data)
--         is STALE for admit.lua and rebuilt.
--         A campaign's gate (reserve.lua) also has usesPerCode, and
--         codes and orderCodes: how many code counts and order codes were
--         staged (stage.lua, into KEYS[10] and KEYS[11]) for KEYS[8] and
--         KEYS[9]; without them those hashes are left empty.
-- then n, then n customer pairs (customerId, count), then order pairs
--         (orderId, value): the last chunk of the snapshot, inline.
--
-- Mode "recover" (kafka mode's consumer, at a recovery marker) installs it
-- when nothing is loaded or the gate is stale (another server, or marked
-- lost-data), else leaves it; mode "replace" with an epoch already installed
-- is a retried call and changes nothing.
--
-- Returns 1 installed, 0 already loaded (mode "load"; the staged chunks are
-- dropped).
--
-- Why staging: a large snapshot goes in several calls, and two instances may
-- warm the same voucher at once from different database snapshots. Writing
-- chunks straight into the live hashes with the stock key last would keep
-- reserve at NOT_LOADED until the end, but could merge the two snapshots'
-- orders and counts into a gate that matches neither (an order released in
-- one snapshot, still live in the other, with the other's counter: one use
-- too many). Each load stages into its own keys, and this script alone
-- decides, swapping them in whole or dropping them.

local stock, customers, orders, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local stagedCustomers, stagedOrders, paused = KEYS[5], KEYS[6], KEYS[7]
local codes, orderCodes, stagedCodes, stagedOrderCodes = KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local markers = KEYS[12]

local k = tonumber(ARGV[7])
local extra = {}
for i = 8, 7 + 2 * k, 2 do
  extra[ARGV[i]] = ARGV[i + 1]
end
local server = run_id()
local loaded = redis.call('EXISTS', stock) == 1
local skip = ARGV[1] == 'load' and loaded
if ARGV[1] == 'recover' and loaded and redis.call('HGET', meta, 'server') == server then
  skip = true
end
if ARGV[1] == 'replace' and extra['epoch'] and redis.call('HGET', meta, 'epoch') == extra['epoch'] then
  skip = true
end
if skip then
  redis.call('DEL', stagedCustomers, stagedOrders, stagedCodes, stagedOrderCodes)
  return 0
end

-- A staged chunk that expired before this commit would install half a gate.
local nCodes, nOrderCodes = tonumber(extra['codes'] or '0'), tonumber(extra['orderCodes'] or '0')
if redis.call('HLEN', stagedCustomers) ~= tonumber(ARGV[5])
  or redis.call('HLEN', stagedOrders) ~= tonumber(ARGV[6])
  or redis.call('HLEN', stagedCodes) ~= nCodes
  or redis.call('HLEN', stagedOrderCodes) ~= nOrderCodes then
  redis.call('DEL', stagedCustomers, stagedOrders, stagedCodes, stagedOrderCodes)
  return redis.error_reply('GATE_LOAD staged chunks are missing; load again')
end

local function hset_pairs(key, first, last)
  -- Batches keep unpack within Lua's C stack limit (about 8000 values).
  local batch = {}
  for i = first, last, 2 do
    batch[#batch + 1] = ARGV[i]
    batch[#batch + 1] = ARGV[i + 1]
    if #batch == 1000 then
      redis.call('HSET', key, unpack(batch))
      batch = {}
    end
  end
  if #batch > 0 then
    redis.call('HSET', key, unpack(batch))
  end
end

-- A total raised (extend.lua) while nothing was loaded, after this
-- snapshot may have been read: its difference is added below.
local raised = tonumber(redis.call('HGET', meta, 'raised') or '0')
local remaining = tonumber(ARGV[2])
if extra['total'] and raised > tonumber(extra['total']) then
  remaining = remaining + raised - tonumber(extra['total'])
  extra['total'] = tostring(raised)
end

-- What the gate held (or leftovers of an evicted stock key) must not leak
-- into the new gate.
redis.call('DEL', customers, orders, meta, codes, orderCodes, KEYS[13], KEYS[14])
if extra['periods'] then
  for line in string.gmatch(extra['periods'], '[^\n]+') do
    local idx, e, counts = string.match(line, '^(%d+)\t(%d+)\t(.*)$')
    local key = KEYS[tonumber(idx)]
    redis.call('DEL', key)
    for field, uses in string.gmatch(counts, '([^,=]+)=(%d+)') do
      redis.call('HSET', key, field, uses)
    end
    redis.call('PEXPIREAT', key, string.format('%.0f', tonumber(e) + periodGrace))
  end
end
if extra['orderPeriods'] then
  for entry in string.gmatch(extra['orderPeriods'], '[^\30]+') do
    local id, held = string.match(entry, '^([^\31]*)\31(.*)$')
    redis.call('HSET', KEYS[13], id, held)
  end
end
if extra['orderDiscounts'] then
  for entry in string.gmatch(extra['orderDiscounts'], '[^\30]+') do
    local id, d = string.match(entry, '^([^\31]*)\31(.*)$')
    redis.call('HSET', KEYS[14], id, d)
  end
end
if nCodes > 0 then
  redis.call('RENAME', stagedCodes, codes)
end
if nOrderCodes > 0 then
  redis.call('RENAME', stagedOrderCodes, orderCodes)
end
if tonumber(ARGV[5]) > 0 then
  redis.call('RENAME', stagedCustomers, customers)
end
if tonumber(ARGV[6]) > 0 then
  redis.call('RENAME', stagedOrders, orders)
end
local at = 8 + 2 * k
local n = tonumber(ARGV[at])
hset_pairs(customers, at + 1, at + 2 * n)
hset_pairs(orders, at + 1 + 2 * n, #ARGV)
-- version: this load's own, so a reconciliation pass whose snapshots were
-- read before it does not lower the new stock (lower.lua).
local loadedAt = redis.call('TIME')
redis.call('HSET', meta, 'perUserLimit', ARGV[3], 'expireAt', ARGV[4], 'version', loadedAt[1] .. '.' .. loadedAt[2])
if extra['budget'] then
  -- What the snapshot's reservations hold is spent already: a rebuilt gate
  -- never hands out more than the database's budget_amount - budget_used.
  redis.call('HSET', meta, 'budget', extra['budget'])
end
if extra['room'] then
  -- voucher.MoneyRoom of the database's budget_used, kept as the budget is.
  redis.call('HSET', meta, 'room', extra['room'])
end
if extra['usesPerCode'] then
  redis.call('HSET', meta, 'usesPerCode', extra['usesPerCode'])
end
if extra['admitted'] then
  -- The database's admitted_count (the last position it holds; kafka mode):
  -- admit.lua numbers from it, so a reloaded gate continues and never
  -- starts at 1 again.
  redis.call('HSET', meta, 'admitted', extra['admitted'])
end
if extra['total'] then
  -- The total the stock stands for, so extend.lua raises it by the difference.
  redis.call('HSET', meta, 'total', extra['total'])
end
if extra['epoch'] then
  local now = now_ms()
  local offset = now - tonumber(extra['dbNow'])
  redis.call('HSET', meta, 'epoch', extra['epoch'], 'server', server,
    'startsAt', tonumber(extra['startsAt']) + offset, 'endsAt', tonumber(extra['endsAt']) + offset, 'offset', offset,
    'minOrder', extra['minOrder'], 'ttl', extra['ttl'], 'lease', extra['lease'])
end
redis.call('SET', stock, remaining)

for _, key in ipairs({stock, customers, orders, meta, codes, orderCodes, KEYS[13], KEYS[14]}) do
  if tonumber(ARGV[4]) > 0 then
    redis.call('PEXPIREAT', key, ARGV[4])
  else
    -- RENAME kept the staged keys' short TTL.
    redis.call('PERSIST', key)
  end
end
if ARGV[1] ~= 'load' then
  -- The pause lasts until the reload at the last marker of a rebuild
  -- published: a reload at an earlier one (another rebuild's, or a recovery
  -- marker) that lifted it would let the gate admit orders whose events lie
  -- behind a marker still ahead of the consumer, and the reload there would
  -- forget them after their 201 (explorer seed 58: three rebuilds at once).
  if extra['epoch'] then
    redis.call('ZREM', markers, extra['epoch'])
  end
  redis.call('ZREMRANGEBYSCORE', markers, '-inf', now_ms())
  if redis.call('ZCARD', markers) == 0 then
    redis.call('DEL', paused)
  end
  -- A rebuild may raise the stock: every instance drops its sold-out
  -- snapshot of the voucher (release.lua).
  redis.call('PUBLISH', 'voucher:released', string.match(stock, '^voucher:{(.*)}:stock$'))
end
return 1
