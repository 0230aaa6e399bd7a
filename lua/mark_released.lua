-- mark_released.lua: decide a release or an expiry on a flash voucher's gate
-- (kafka mode), without giving the use back yet.
--
-- The order is marked "releasing": it answers as released from now on, but
-- its use stays counted here until the database has released the row (the
-- consumer applied the release event, or the expiry sweep released it), and
-- only then does release.lua give it back. Giving it back at once could let
-- another order take the use while the database still counts it: that
-- order's event, applied before the release in a sold-out voucher, would be
-- refused by the database after its success was returned. The gate may be
-- lower than the database allows for a moment, never higher.
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:orders,
-- KEYS[3] voucher:{CODE}:paused, KEYS[4] voucher:{CODE}:meta
-- (layout in reserve.lua and admit.lua)
-- ARGV[1] orderId
-- ARGV[2] 'release' (a caller's release) or 'expire' (the sweep: only once
--         now >= expiresAt)
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
--   RELEASED      released (or being released) before; nothing changed
--   CONFIRMED     confirmed: it cannot be released; nothing changed
--   NOT_DUE       (expire) live and not yet past expiresAt; nothing changed
--   RELEASED_NOW  live: now releasing

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
if ARGV[2] == 'expire' and now < tonumber(f[5]) then
  return {'NOT_DUE', known, kept}
end
local releasing = f[1] .. ':' .. f[2] .. ':releasing:' .. f[4] .. ':' .. f[5] .. placed(f)
redis.call('HSET', KEYS[2], ARGV[1], releasing)
return {'RELEASED_NOW', releasing, kept}
