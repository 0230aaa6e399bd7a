-- admit.lua: decide one reserve on a flash voucher's gate in kafka mode,
-- atomically, on the gate's own clock.
--
-- In kafka mode the gate is the decision point of a flash reservation: the
-- database learns of it only when the consumer applies its event. An
-- admission is therefore only a claim until its owner (the request that made
-- it) has its event acknowledged by the broker and settles it with
-- admission.lua, or the consumer applies the event (apply_check.lua),
-- whichever comes first. Until then it is "pending" and only its owner may
-- give its use back (compare-and-set on its token, the createdAt below), so
-- a retry of the order can never answer success for a use that its first
-- request gives back.
--
-- KEYS[1] voucher:{CODE}:stock      remaining uses (its presence means "loaded")
-- KEYS[2] voucher:{CODE}:customers  hash customerId -> uses held
-- KEYS[3] voucher:{CODE}:orders     hash orderId -> "customerId:amount:STATE:createdAt:expiresAt"
--                                   STATE pending, live, confirmed, releasing,
--                                   released, void or lost; times in Unix ms
--                                   on the gate's clock; createdAt is the
--                                   admission's token (unique per order)
-- KEYS[4] voucher:{CODE}:meta       hash perUserLimit, epoch, server, startsAt,
--                                   endsAt, minOrder, ttl, lease (load.lua),
--                                   and budget (left) for a voucher with one
-- KEYS[5] voucher:{CODE}:paused     present while the gate is rebuilt
-- KEYS[6] order:{ORDERID}           (optional, on a single Redis: the
--                                   orderId's claim across vouchers, as
--                                   order_claim.lua keeps it; on a cluster
--                                   it lives in another slot and the caller
--                                   claims it in a call of its own)
-- ARGV[1] orderId, ARGV[2] customerId, ARGV[3] orderAmount
-- ARGV[4] the voucher's code and ARGV[5] the claim's life in ms, with KEYS[6]
-- ARGV[6] the order's discount (Voucher.DiscountFor), taken from the budget
--         with the use; an adopted admission keeps the one it took
--
-- Returns {verdict, the order's value after the call ('' if none), epoch}.
-- Verdicts: PAUSED, NOT_LOADED, STALE, CLAIMED_ELSEWHERE (with KEYS[6]: the
-- orderId is claimed by another voucher; nothing taken) (the gate's data may be older than
-- what it answered before: another Redis server holds it now, see load.lua),
-- ORDER_CONFLICT, RELEASED, LOST, PENDING (the order's first admission is
-- still being settled by its owner), DUPLICATE (live or confirmed),
-- NOT_ELIGIBLE, ALREADY_USED, OUT_OF_STOCK, BUDGET_EXHAUSTED (a use is left,
-- the budget cannot cover the discount), ADMITTED (one use taken, pending)
-- and ADOPTED (a pending admission whose owner outlived its lease: this
-- caller is its owner now, with a new token; no second use is taken).
-- Every check runs before the first write: Redis does not roll a script back.

if redis.call('EXISTS', KEYS[5]) == 1 then
  return {'PAUSED', '', ''}
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {'NOT_LOADED', '', ''}
end
local m = redis.call('HMGET', KEYS[4], 'perUserLimit', 'epoch', 'server', 'startsAt', 'endsAt', 'minOrder', 'ttl', 'lease', 'budget')
local epoch = m[2] or ''
local server = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
if m[3] ~= server then
  return {'STALE', '', epoch}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, lease = tonumber(m[7]), tonumber(m[8])

local who = ARGV[2] .. ':' .. ARGV[3]
local known = redis.call('HGET', KEYS[3], ARGV[1])
local after = 0 -- a new token must be later than a voided one's
if known then
  local f = {}
  for part in string.gmatch(known, '[^:]+') do
    f[#f + 1] = part
  end
  local state = f[3]
  if f[1] .. ':' .. f[2] ~= who then
    return {'ORDER_CONFLICT', known, epoch}
  elseif state == 'released' or state == 'releasing' then
    return {'RELEASED', known, epoch}
  elseif state == 'lost' then
    return {'LOST', known, epoch}
  elseif state == 'pending' then
    if now - tonumber(f[4]) < lease then
      return {'PENDING', known, epoch}
    end
    local created = math.max(now, tonumber(f[4]) + 1)
    local adopted = who .. ':pending:' .. created .. ':' .. (created + ttl)
    redis.call('HSET', KEYS[3], ARGV[1], adopted)
    return {'ADOPTED', adopted, epoch}
  elseif state ~= 'void' then
    return {'DUPLICATE', known, epoch}
  end
  after = tonumber(f[4]) + 1 -- void: decided afresh
end

local claim = KEYS[6]
if claim then
  local owner = redis.call('GET', claim)
  if owner and owner ~= ARGV[4] then
    return {'CLAIMED_ELSEWHERE', '', epoch}
  end
end
if now < tonumber(m[4]) or now >= tonumber(m[5]) or tonumber(ARGV[3]) < tonumber(m[6]) then
  return {'NOT_ELIGIBLE', '', epoch}
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if held >= tonumber(m[1]) then
  return {'ALREADY_USED', '', epoch}
end
if tonumber(stock) <= 0 then
  return {'OUT_OF_STOCK', '', epoch}
end
local discount = tonumber(ARGV[6] or '0')
if m[9] and tonumber(m[9]) < discount then
  return {'BUDGET_EXHAUSTED', '', epoch}
end

local created = math.max(now, after)
local value = who .. ':pending:' .. created .. ':' .. (created + ttl)
redis.call('DECR', KEYS[1])
if m[9] and discount > 0 then
  -- The digits as given: Lua's numbers are doubles, Redis's integers 64-bit.
  redis.call('HINCRBY', KEYS[4], 'budget', '-' .. ARGV[6])
end
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HSET', KEYS[3], ARGV[1], value)
if claim then
  redis.call('SET', claim, ARGV[4], 'PX', ARGV[5])
end
-- The hashes may have just been created (Redis keeps no empty hash): give
-- them the stock key's deadline, once.
for _, key in ipairs({KEYS[2], KEYS[3]}) do
  if redis.call('PTTL', key) == -1 then
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl > 0 then
      redis.call('PEXPIRE', key, pttl)
    end
  end
end
return {'ADMITTED', value, epoch}
