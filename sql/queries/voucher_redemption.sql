-- VoucherRedemptionInsert claims the orderId; no row back means another
-- request holds it (this waits for that request's transaction to end).
-- name: VoucherRedemptionInsert :one
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, 'RESERVED', sqlc.arg(created_at), sqlc.arg(expires_at))
ON CONFLICT (order_id) DO NOTHING
RETURNING *;

-- name: VoucherRedemptionGetByOrderID :one
SELECT * FROM voucher_redemption WHERE order_id = $1;

-- VoucherRedemptionConfirm confirms a live reservation that has not expired.
-- name: VoucherRedemptionConfirm :one
UPDATE voucher_redemption
SET status = 'CONFIRMED', confirmed_at = clock_timestamp()
WHERE order_id = $1 AND voucher_code = $2 AND status = 'RESERVED' AND expires_at > now()
RETURNING *;

-- VoucherRedemptionRelease releases a live reservation; the status condition
-- makes a second release (or a racing expiry) change nothing.
-- name: VoucherRedemptionRelease :one
UPDATE voucher_redemption
SET status = 'RELEASED', released_at = clock_timestamp()
WHERE order_id = $1 AND voucher_code = $2 AND status = 'RESERVED'
RETURNING *;

-- VoucherRedemptionExpire releases a reservation only if it is still live and
-- past its deadline, so two sweeping instances never release it twice.
-- name: VoucherRedemptionExpire :one
UPDATE voucher_redemption
SET status = 'RELEASED', released_at = clock_timestamp()
WHERE order_id = $1 AND status = 'RESERVED' AND expires_at <= now()
RETURNING *;

-- name: VoucherRedemptionListDue :many
SELECT order_id FROM voucher_redemption
WHERE status = 'RESERVED' AND expires_at <= now()
ORDER BY expires_at
LIMIT $1;

-- name: VoucherRedemptionListLive :many
SELECT order_id, customer_id, order_amount FROM voucher_redemption
WHERE voucher_code = $1 AND status IN ('RESERVED', 'CONFIRMED');

-- name: VoucherRedemptionListRecent :many
SELECT * FROM voucher_redemption
WHERE voucher_code = $1
ORDER BY created_at DESC
LIMIT $2;

-- VoucherRedemptionGetByOrderIDs reads the rows of several orders at once
-- (the coalesced lookups of Store.Reservation).
-- name: VoucherRedemptionGetByOrderIDs :many
SELECT * FROM voucher_redemption WHERE order_id = ANY(sqlc.arg(order_ids)::text[]);
