-- healthy.lua: is a flash voucher's gate fit to decide (kafka mode)?
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:meta
-- Returns 1 when the gate is loaded, on the Redis server that now serves it
-- (the run_id load.lua stored), and not marked lost-data; else 0.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local s = redis.call('HGET', KEYS[2], 'server')
if s == string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') then
  return 1
end
return 0
