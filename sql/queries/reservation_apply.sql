-- Queries of the Kafka write path's consumer, which applies the gate's
-- decisions to the database (internal/postgres/events.go). The gate decided
-- the window and the expiry already, so none of them checks the clock; the
-- CHECK constraints still bound every count.

-- ReservationApplyGetForUpdate locks an order's row for the event that
-- applies to it.
-- name: ReservationApplyGetForUpdate :one
SELECT * FROM voucher_redemption WHERE order_id = $1 FOR UPDATE;

-- ReservationApplyCustomerTake counts one more use for the customer; past
-- the per-customer limit the CHECK voucher_customer_within_limit fires.
-- name: ReservationApplyCustomerTake :exec
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit)
VALUES ($1, $2, 1, (SELECT per_user_limit FROM voucher WHERE code = $1))
ON CONFLICT (voucher_code, customer_id) DO UPDATE
SET used_count = vc.used_count + 1;

-- ReservationApplyVoucherTake counts one more use held, whatever the clock;
-- past the total limit the CHECK voucher_used_within_limit fires.
-- name: ReservationApplyVoucherTake :execrows
UPDATE voucher
SET used_count = used_count + 1, reserved_count = reserved_count + 1
WHERE code = $1;

-- ReservationApplyConfirm confirms a live reservation even past expires_at:
-- the gate confirmed it in time.
-- name: ReservationApplyConfirm :one
UPDATE voucher_redemption
SET status = 'CONFIRMED', confirmed_at = sqlc.arg(decided_at)
WHERE order_id = $1 AND status = 'RESERVED'
RETURNING *;

-- name: ReservationApplyRelease :one
UPDATE voucher_redemption
SET status = 'RELEASED', released_at = sqlc.arg(decided_at)
WHERE order_id = $1 AND status = 'RESERVED'
RETURNING *;

-- ReservationApplyListDue lists reservations past their deadline with
-- whether their voucher is flash (the gate decides those first).
-- name: ReservationApplyListDue :many
SELECT sqlc.embed(voucher_redemption), v.flash
FROM voucher_redemption
JOIN voucher v ON v.code = voucher_redemption.voucher_code
WHERE voucher_redemption.status = 'RESERVED' AND voucher_redemption.expires_at <= now()
ORDER BY voucher_redemption.expires_at
LIMIT $1;

-- ReservationApplyListLive lists a voucher's live orders with their states
-- and times, which a gate in kafka mode holds.
-- name: ReservationApplyListLive :many
SELECT order_id, customer_id, order_amount, status, created_at, expires_at FROM voucher_redemption
WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED');

-- The consumer's batch (Store.ApplyReservedBatch): the reserved events of
-- one voucher in a poll, in one transaction. Rows are made only for orders
-- the database does not hold; the events of the others are applied one by
-- one afterwards (they change nothing, or are refused).
-- name: ReservationApplyBatchInsert :many
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at)
SELECT o.order_id, sqlc.arg(code), o.customer_id, o.order_amount, o.discount_amount, 'RESERVED', o.created_at, o.expires_at
FROM (SELECT unnest(sqlc.arg(order_ids)::text[]) AS order_id,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(order_amounts)::bigint[]) AS order_amount,
             unnest(sqlc.arg(discount_amounts)::bigint[]) AS discount_amount,
             unnest(sqlc.arg(created_ats)::timestamptz[]) AS created_at,
             unnest(sqlc.arg(expires_ats)::timestamptz[]) AS expires_at) AS o
ORDER BY o.order_id
ON CONFLICT (order_id) DO NOTHING
RETURNING order_id, customer_id;

-- ReservationApplyBatchCustomerTake counts uses[i] more for customer_ids[i]
-- (each customer once); past a customer's limit the CHECK fires.
-- name: ReservationApplyBatchCustomerTake :exec
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit)
SELECT sqlc.arg(code), c.customer_id, c.uses, (SELECT per_user_limit FROM voucher WHERE code = sqlc.arg(code))
FROM (SELECT unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id,
             unnest(sqlc.arg(uses)::integer[]) AS uses) AS c
ORDER BY c.customer_id
ON CONFLICT (voucher_code, customer_id) DO UPDATE
SET used_count = vc.used_count + excluded.used_count;

-- ReservationApplyBatchVoucherTake counts n more uses held, whatever the
-- clock; past the total limit the CHECK voucher_used_within_limit fires.
-- name: ReservationApplyBatchVoucherTake :execrows
UPDATE voucher
SET used_count = used_count + sqlc.arg(n)::integer, reserved_count = reserved_count + sqlc.arg(n)::integer
WHERE code = sqlc.arg(code);

-- ReservationApplyListAll lists every order of a voucher, released ones
-- too, with their states and times: a gate in kafka mode answers retries,
-- confirms and releases of all of them without reading the database.
-- name: ReservationApplyListAll :many
SELECT order_id, customer_id, order_amount, status, created_at, expires_at FROM voucher_redemption
WHERE voucher_code = $1;
