-- marker.lua: note that a kafka-mode rebuild's marker is about to be
-- published, so that the pause lasts until the consumer's reload at it
-- (load.lua lifts the pause only when no such marker is left).
--
-- KEYS[1] voucher:{CODE}:markers  sorted set epoch -> Unix ms it stops counting
-- ARGV[1] the rebuild's epoch, ARGV[2] how long it counts (ms): a marker
--         never reached stops holding the pause then, as the pause itself
--         lapses.

local now = now_ms()
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
return 1
