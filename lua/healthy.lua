-- healthy.lua: is a flash voucher's gate fit to decide (kafka mode)?
--
-- KEYS[1] voucher:{CODE}:stock, KEYS[2] voucher:{CODE}:meta
-- Returns {1, run_id} when the gate is loaded on the Redis server that now
-- serves it (the run_id load.lua stored), else {0, run_id}: run_id is the
-- serving server's, which a recovery marker carries to name its incident.

local server = run_id()
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, server}
end
if redis.call('HGET', KEYS[2], 'server') == server then
  return {1, server}
end
return {0, server}
