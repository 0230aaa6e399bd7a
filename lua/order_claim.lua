-- order_claim.lua: remember which voucher an orderId was reserved on, across
-- vouchers (kafka mode).
--
-- A voucher's gate knows only its own orders, and in kafka mode the database
-- learns of a flash reservation only when its event is applied, so neither
-- would see the same orderId reserved on another voucher a moment ago. A
-- winner claims its orderId here after its gate admitted it; an orderId
-- claimed for another voucher is ORDER_CONFLICT.
--
-- KEYS[1] order:{ORDERID}  the code of the voucher that reserved it
-- ARGV[1] 'claim', 'unclaim' or 'read', ARGV[2] the voucher's code,
-- ARGV[3] how long the claim lasts, in ms (past the consumer's delay, the
--         database answers)
--
-- 'claim' returns {the voucher holding the claim after the call (ARGV[2] when
-- it was free or already ours), this Redis server's run_id}: a claim found
-- free proves nothing on a server that may have started after the claim was
-- made (a restart that lost the data, a failover), so the caller trusts it
-- only once the events published before it first saw that server are
-- applied (voucher.claimFence). 'unclaim' drops the claim if it is ours (a
-- reserve whose event was surely not written) and returns ARGV[2]. 'read'
-- returns {the voucher holding the claim, '' when none, the run_id}: no
-- claim on a server the caller has not settled proves nothing either.

local owner = redis.call('GET', KEYS[1])
if ARGV[1] == 'read' then
  return {owner or '', run_id()}
end
if ARGV[1] == 'claim' then
  local server = run_id()
  if owner then
    return {owner, server}
  end
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return {ARGV[2], server}
end
if owner == ARGV[2] then
  redis.call('DEL', KEYS[1])
end
return ARGV[2]
