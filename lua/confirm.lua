-- confirm.lua: decide a confirm on a flash voucher's gate (kafka mode).
--
-- In kafka mode the database learns of a flash reservation only when the
-- consumer applies its event, so the gate decides confirm, release and
-- expiry atomically, and the events carry its decisions to the database.
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:orders,
-- KEYS[3] voucher:{CODE}:paused, KEYS[4] voucher:{CODE}:meta
-- (layout in reserve.lua and admit.lua)
-- ARGV[1] orderId
--
-- "now" is this Redis server's clock (TIME), the clock expiresAt was set on
-- (admit.lua): every instance decides the same, whatever its own clock.
--
-- Returns {answer, the order's value after the call ('' when unknown)}:
--   PAUSED        an operator is rebuilding the gate; nothing changed
--   NOT_LOADED    the gate holds nothing for the voucher
--   STALE         another Redis server holds the gate, or it lost data: it
--                 is rebuilt before it decides again (admit.lua)
--   UNKNOWN       the gate does not know the order, or holds it void or lost
--   PENDING       its admission is still being settled: its reserve has not
--                 been answered as a success
--   LEGACY        a live order written in sync mode (no state, no times):
--                 the database decides it, as in sync mode
--   RELEASED      released (or being released); nothing changed
--   CONFIRMED     confirmed before; nothing changed
--   EXPIRED       live but now >= expiresAt; nothing changed (the expiry
--                 sweep releases it)
--   CONFIRMED_NOW live and in time: now confirmed

-- PAUSED to CONFIRMED are decided by settled (prelude.lua), in that order
-- (STALE first on a gate loaded on another Redis server).
local answer, known, f = settled(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1])
-- The third value: the order's kept discount ('' if none: its amount's),
-- KEYS[5] voucher:{CODE}:orderdiscounts (prelude.lua's order_discount).
local kept = ''
if KEYS[5] and (not answer or answer[2] ~= '') then
  kept = redis.call('HGET', KEYS[5], ARGV[1]) or ''
end
if answer then
  answer[3] = kept
  return answer
end
local now = now_ms()
if now >= tonumber(f[5]) then
  return {'EXPIRED', known, kept}
end
local confirmed = f[1] .. ':' .. f[2] .. ':confirmed:' .. f[4] .. ':' .. f[5] .. placed(f)
redis.call('HSET', KEYS[2], ARGV[1], confirmed)
return {'CONFIRMED_NOW', confirmed, kept}
