-- end.lua: close a flash voucher's window at the gate now (kafka mode, where
-- admit.lua decides the window from the gate's meta): an operator's "end
-- now" stops every instance's admissions at once. Never reopens a window.
--
-- KEYS[1] voucher:{CODE}:meta
-- Returns 1 when the window was closed by this call, 0 otherwise (not loaded,
-- not a kafka-mode gate, or already closed).

local ends = redis.call('HGET', KEYS[1], 'endsAt')
if not ends then
  return 0
end
local now = now_ms()
if tonumber(ends) <= now then
  return 0
end
redis.call('HSET', KEYS[1], 'endsAt', now)
return 1
