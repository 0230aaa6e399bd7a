-- Queries of the Kafka write path's consumer, which applies the gate's
-- decisions to the database (internal/postgres/events.go). The gate decided
-- the window and the expiry already, so none of them checks the clock; the
-- CHECK constraints still bound every count.

-- Its "take a use" statements are shared with the reserves: see
-- voucher_redemption.sql, voucher_customer.sql and voucher.sql.

-- ReservationApplyGetForUpdate locks an order's row for the event that
-- applies to it.
-- name: ReservationApplyGetForUpdate :one
SELECT * FROM voucher_redemption WHERE order_id = $1 FOR UPDATE;

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

-- ReservationApplyListAll lists every order of a voucher, released ones
-- too, with their states and times: a gate in kafka mode answers retries,
-- confirms and releases of all of them without reading the database.
-- name: ReservationApplyListAll :many
SELECT order_id, customer_id, order_amount, status, created_at, expires_at FROM voucher_redemption
WHERE voucher_code = $1;
