-- VoucherSearch (the dashboard's list) lists vouchers newest first, filtered by a piece of the code
-- (lower case, LIKE-escaped by the caller), a state and flash. The state
-- expression is voucher.Voucher.State in SQL: keep the two in step.
-- name: VoucherSearch :many
SELECT * FROM voucher
WHERE (sqlc.arg(search)::text = '' OR lower(code) LIKE '%' || sqlc.arg(search)::text || '%')
  AND (sqlc.arg(state)::text = '' OR
       CASE WHEN now() > ends_at THEN 'ended'
            WHEN used_count >= total_limit THEN 'sold-out'
            WHEN now() < starts_at THEN 'scheduled'
            ELSE 'live' END = sqlc.arg(state)::text)
  AND (NOT sqlc.arg(flash_only)::boolean OR flash)
ORDER BY created_at DESC, code DESC
LIMIT sqlc.arg(max_rows);

-- VoucherUpdateBeforeStart changes every term of a voucher whose window has
-- not opened by the database's clock and that holds no use; no row back
-- means it is unknown or has started.
-- name: VoucherUpdateBeforeStart :one
UPDATE voucher
SET code = sqlc.arg(new_code),
    discount_amount = sqlc.arg(discount_amount),
    min_order_amount = sqlc.arg(min_order_amount),
    total_limit = sqlc.arg(total_limit),
    per_user_limit = sqlc.arg(per_user_limit),
    starts_at = sqlc.arg(starts_at),
    ends_at = sqlc.arg(ends_at),
    flash = sqlc.arg(flash)
WHERE code = sqlc.arg(code) AND starts_at > now() AND used_count = 0
RETURNING *;

-- VoucherEndNow closes the window of a live voucher now; no row back means
-- it is unknown, has not started or has ended.
-- name: VoucherEndNow :one
UPDATE voucher
SET ends_at = now()
WHERE code = $1 AND starts_at < now() AND ends_at > now()
RETURNING *;
