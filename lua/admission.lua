-- admission.lua: settle a pending admission (kafka mode), compare-and-set on
-- its token (its createdAt), so only the admission it names is touched.
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:customers,
-- KEYS[3] voucher:{CODE}:orders, KEYS[4] voucher:{CODE}:meta (admit.lua),
-- KEYS[5] voucher:{CODE}:paused (gate.go Pause)
-- KEYS[6] voucher:{CODE}:orderperiods: a use given back (forget, void)
--         goes back to the periods it was counted in (prelude.lua)
-- KEYS[7] voucher:{CODE}:orderdiscounts: a use given back (forget, void)
--         gives back the order's own discount when it keeps one
--         (prelude.lua's order_discount), else the one passed; the record
--         stays with the void tombstone (admit.lua replaces it)
-- ARGV[1] op:
--   'finalize' the owner's event was acknowledged: pending -> live, and the
--              owner may answer success. Racing the consumer, which turns
--              pending into live too (apply_check.lua), either wins.
--              Fenced: refused (FAIL, the admission stays pending) while
--              the gate is paused for a rebuild, and STALE on a server
--              other than the one the gate was loaded on (a failover). The
--              marker of a rebuild or recovery is published after the pause
--              or the server change, so an event acknowledged before a
--              finalize that succeeds lies before the marker, and the
--              reload at the marker holds the order: a 201 is never
--              answered for an admission the reload then voids.
--   'forget'   the owner's publish surely failed: pending -> void, its use
--              given back. Refused once the consumer applied it (live).
--   'void'     reconciliation: as 'forget', only past the admission's lease
--              (the owner died or never learnt its publish's outcome); a
--              late event of it is then skipped by the consumer.
--   'lose'     the database refused the applied event (dead letter): the
--              order is marked lost and its use stays taken, so neither a
--              retry nor reconciliation hands that use out again.
--   'revive'   an operator applies a dead letter again: lost -> live, so the
--              consumer's check (apply_check.lua) lets its event through.
--              The use was never given back while lost, so none is taken.
-- ARGV[2] n, the number of admissions settled by this call (the acknowledged
-- admissions of one voucher are finalized together: one script for many
-- winners), then n groups of five:
--   orderId, token (createdAt, Unix ms), the epoch the admission was made
--   in, "customerId:amount", its discount (given back to the budget, if the
--   voucher has one, with the use)
-- Each admission is settled exactly as if it had a call of its own, in order.
--
-- Returns, for each admission, {answer, the order's value after the call ('' if none)}
-- (2n values):
--   OK     done (for finalize: the order is live, or further along)
--   FAIL   not this admission's to settle: another token holds the order, it
--          is void or lost, or the gate was reloaded (another epoch) without it
--   STALE  the gate may have lost data (not loaded, marked lost-data, or the
--          order missing in its own epoch): nothing changed

local stock = redis.call('GET', KEYS[1])
local m = redis.call('HMGET', KEYS[4], 'epoch', 'server', 'lease')

-- settle settles one admission; the reads above are shared by the call's
-- admissions (only 'lost-data' below changes them, and it is kept in m).
-- released: a use was given back by this call (forget, void).
local released = false

local paused = redis.call('EXISTS', KEYS[5]) == 1
local server -- this Redis server's run_id, read once by the first finalize

local function settle(op, orderId, token, epoch, who, discount)
  if not stock then
    return 'STALE', ''
  end
  if op == 'finalize' and m[2] ~= 'lost-data' then
    server = server or run_id()
    if m[2] ~= server then
      return 'STALE', ''
    end
  end
  -- No run_id check here (admit.lua has it): an admission this server holds is
  -- settled on it, one it lacks is missing in its own epoch (below), and a
  -- gate known to have lost data is rebuilt first.
  if m[2] == 'lost-data' then
    return 'STALE', ''
  end
  local known = redis.call('HGET', KEYS[3], orderId)
  if not known then
    if m[1] == epoch then
      -- A void order keeps a tombstone, so in its own epoch a missing order
      -- means the gate lost it: marked stale, it is rebuilt (load.lua).
      redis.call('HSET', KEYS[4], 'server', 'lost-data')
      m[2] = 'lost-data'
      return 'STALE', ''
    end
    if op == 'finalize' then
      -- Reloaded since the admission, without it: a tombstone makes the
      -- consumer skip its event, so it is neither answered nor applied.
      local tomb = who .. ':void:' .. token .. ':' .. token
      redis.call('HSET', KEYS[3], orderId, tomb)
      return 'FAIL', tomb
    end
    return 'FAIL', ''
  end
  local f = fields(known)
  local state = f[3]
  if f[4] ~= token or f[1] .. ':' .. f[2] ~= who then
    return 'FAIL', known
  end
  local function with(s)
    return f[1] .. ':' .. f[2] .. ':' .. s .. ':' .. f[4] .. ':' .. f[5] .. placed(f)
  end

  if op == 'finalize' then
    if state == 'pending' and paused then
      return 'FAIL', known
    end
    if state == 'pending' then
      redis.call('HSET', KEYS[3], orderId, with('live'))
      return 'OK', with('live')
    elseif state == 'void' or state == 'lost' then
      return 'FAIL', known
    end
    return 'OK', known
  elseif op == 'lose' then
    if state == 'void' then
      return 'FAIL', known
    end
    redis.call('HSET', KEYS[3], orderId, with('lost'))
    return 'OK', with('lost')
  elseif op == 'revive' then
    if state ~= 'lost' then
      return 'FAIL', known
    end
    redis.call('HSET', KEYS[3], orderId, with('live'))
    return 'OK', with('live')
  end

  -- forget, void
  if state ~= 'pending' or m[1] ~= epoch then
    return 'FAIL', known
  end
  if op == 'void' then
    local now = now_ms()
    if now - tonumber(f[4]) < tonumber(m[3]) then
      return 'FAIL', known
    end
  end
  redis.call('HSET', KEYS[3], orderId, with('void'))
  redis.call('INCR', KEYS[1])
  released = true
  discount = order_discount(KEYS[7], orderId, discount)
  if discount and discount ~= '0' and redis.call('HEXISTS', KEYS[4], 'budget') == 1 then
    redis.call('HINCRBY', KEYS[4], 'budget', discount)
  end
  if discount and discount ~= '0' and redis.call('HEXISTS', KEYS[4], 'room') == 1 then
    redis.call('HINCRBY', KEYS[4], 'room', discount)
  end
  if redis.call('HINCRBY', KEYS[2], f[1], -1) <= 0 then
    redis.call('HDEL', KEYS[2], f[1])
  end
  period_give_back(KEYS[6], orderId)
  return 'OK', with('void')
end

local op, n = ARGV[1], tonumber(ARGV[2])
local out = {}
for i = 0, n - 1 do
  local a = 3 + 5 * i
  local answer, value = settle(op, ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
  out[#out + 1] = answer
  out[#out + 1] = value
end
if released then
  -- As release.lua: every instance drops its sold-out snapshot at once.
  redis.call('PUBLISH', 'voucher:released', string.match(KEYS[1], '^voucher:{(.*)}:stock$'))
end
return out
