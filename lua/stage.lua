-- stage.lua: stage one chunk of a large snapshot for load.lua, in keys of
-- this load alone, so nothing is visible to reserve until load.lua commits.
--
-- KEYS[1] voucher:{CODE}:load:TOKEN:customers, KEYS[2] voucher:{CODE}:load:TOKEN:orders
-- ARGV[1] how long the staged keys live, in ms (a crashed load leaves nothing
--         behind for long)
-- ARGV[2] n, then n customer pairs (customerId, count), then order pairs
--         (orderId, value) as in load.lua
--
-- Returns 1. Staging the same chunk twice is harmless (HSET overwrites).

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

local n = tonumber(ARGV[2])
hset_pairs(KEYS[1], 3, 2 + 2 * n)
hset_pairs(KEYS[2], 3 + 2 * n, #ARGV)
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    redis.call('PEXPIRE', key, ARGV[1])
  end
end
return 1
