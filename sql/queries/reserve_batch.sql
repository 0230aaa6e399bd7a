-- The batched write of flash winners (internal/postgres/batch.go): the
-- admitted reserves of one voucher waiting at the same moment go to the
-- database in one transaction, in the single reserve's lock order (orders,
-- customers, then the voucher row), each set in a fixed order so two batches
-- never wait on each other in a cycle. A statement that cannot take every
-- row it was given tells the caller, which rolls back and writes those
-- reserves one by one, so every refusal gets its own exact answer.

-- ReserveBatchClaimOrders claims the orderIds the voucher's terms admit by
-- the database's clock (window, minimum); an order already held, or not
-- eligible, gets no row back.
-- name: ReserveBatchClaimOrders :many
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at)
SELECT o.order_id, v.code, o.customer_id, o.order_amount, v.discount_amount, 'RESERVED', now(),
       now() + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
FROM (SELECT unnest(sqlc.arg(order_ids)::text[]) AS order_id,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(order_amounts)::bigint[]) AS order_amount) AS o
JOIN voucher v ON v.code = sqlc.arg(code)
WHERE now() BETWEEN v.starts_at AND v.ends_at
  AND o.order_amount >= v.min_order_amount
ORDER BY o.order_id
ON CONFLICT (order_id) DO NOTHING
RETURNING *;

-- ReserveBatchTakeCustomerUses counts uses for each customer (uses[i] for
-- customer_ids[i], each customer once) unless that would pass their limit;
-- a customer at the limit gets no row back.
-- name: ReserveBatchTakeCustomerUses :many
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit)
SELECT v.code, c.customer_id, c.uses, v.per_user_limit
FROM (SELECT unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(uses)::integer[]) AS uses) AS c
JOIN voucher v ON v.code = sqlc.arg(code)
WHERE c.uses <= v.per_user_limit
ORDER BY c.customer_id
ON CONFLICT (voucher_code, customer_id) DO UPDATE
SET used_count = vc.used_count + excluded.used_count
WHERE vc.used_count + excluded.used_count <= vc.use_limit
RETURNING customer_id;

-- name: ReserveBatchEvents :exec
INSERT INTO reservation_event (order_id, voucher_code, customer_id, kind, path)
SELECT o.order_id, sqlc.arg(code), o.customer_id, 'reserved', sqlc.arg(path)
FROM (SELECT unnest(sqlc.arg(order_ids)::text[]) AS order_id,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id) AS o
ORDER BY o.order_id;

-- ReserveBatchTakeUses holds n uses at once if that many are left and the
-- window is open; no row back means not (the batch is then written one by
-- one, so the uses left go to some of it and the others hear OUT_OF_STOCK).
-- name: ReserveBatchTakeUses :one
UPDATE voucher
SET used_count = used_count + sqlc.arg(n)::integer, reserved_count = reserved_count + sqlc.arg(n)::integer
WHERE code = sqlc.arg(code)
  AND used_count + sqlc.arg(n)::integer <= total_limit
  AND now() BETWEEN starts_at AND ends_at
RETURNING used_count;
